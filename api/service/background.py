"""A task a process runs in its background while it serves: started once, cancelled on
stop, whatever it was doing (the import runner, the regrade batch runner, the drift
canary, the audit checkpoints each are one)."""

from __future__ import annotations

import asyncio
import contextlib

__all__ = ["BackgroundTask"]


class BackgroundTask:
    """One named asyncio task running :meth:`_loop`; subclasses write the loop.

    ``start`` twice starts it once; ``stop`` cancels it and waits for it to end (a
    subclass that must tidy up after, extends ``stop``)."""

    #: the task's name, as asyncio shows it
    task_name = "background"

    def __init__(self) -> None:
        """Not started yet."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the task (nothing when it runs already)."""
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self.task_name)

    async def stop(self) -> None:
        """Cancel the task and wait until it ended (nothing when it was not started)."""
        if self._task is None:
            return
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None

    async def _loop(self) -> None:
        """What the task does, until it is cancelled."""
        raise NotImplementedError
