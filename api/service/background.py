"""A task a process runs in its background while it serves: started once, cancelled on
stop, whatever it was doing (the import runner, the regrade batch runner, the drift
canary, the audit checkpoints each are one)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["BackgroundTask", "cancel_and_wait"]


#: how long a stop waits for a cancelled task before cancelling it again
RECANCEL_SECONDS = 1.0


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait until it ended; what it raised besides its cancellation
    is raised here, and a cancellation of the caller is the caller's own.

    While the task runs on, it is cancelled again every :data:`RECANCEL_SECONDS`: a
    cancellation can be lost on its way (CPython 3.11's ``asyncio.wait_for`` returns
    the result of a wait that completes as the cancellation arrives, and a library may
    do the same), and a stop that waited for a lost one would wait for ever.
    """
    task.cancel()
    while not task.done():
        await asyncio.wait({task}, timeout=RECANCEL_SECONDS)
        if not task.done():
            task.cancel()
    if not task.cancelled():
        task.result()


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
        await cancel_and_wait(self._task)
        self._task = None

    async def _loop(self) -> None:
        """What the task does, until it is cancelled."""
        raise NotImplementedError
