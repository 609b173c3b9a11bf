"""The batch runner: one background task per process that moves regrade batch engines on.

It renders the requests of jobs waiting for that, submits batches to the OpenAI Batch
API and polls those under way every ``SRE_JUDGE_REGRADE_BATCH_POLL_SECONDS``
(``api.regrade.batch_engine``). Everything it knows is in the database, so a restarted
service (or another process) resumes each job where it stood: a batch submitted before
the restart is polled, not sent again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from api.regrade.batch_engine import advance
from api.regrade.batch_queries import BatchQueries
from api.service.background import BackgroundTask
from api.service.services import Services, new_worker_id

__all__ = ["BatchRunner"]

log = logging.getLogger("sre_judge.regrade.batch")

#: engine states the runner acts on (``waiting`` is an offline job's: a person uploads)
_ACTIVE = ("rendering", "submitting", "running")


class BatchRunner(BackgroundTask):
    """Moves every regrade job's batch engine on, in the background of a process with
    workers (stopped, a step cut short is taken again by the next process)."""

    task_name = "regrade-batch-runner"

    def __init__(self, services: Services, *, poll_seconds: float | None = None) -> None:
        """Work for ``services``; look every ``poll_seconds`` (default: the setting)."""
        super().__init__()
        self.services = services
        self.actor = f"batch-{new_worker_id()}"
        self._poll = poll_seconds or services.settings.regrade_batch_poll_seconds

    async def run_once(self, *, due: bool = True) -> int:
        """One step for each job whose engine needs one; how many were looked at.
        ``due``: skip an engine whose failed step's wait is not over (False: try it)."""
        engines = await BatchQueries(self.services.store.db).engines_in(_ACTIVE, due=due)
        for engine in engines:
            await advance(self.services, engine, actor=self.actor)
        return len(engines)

    async def _loop(self) -> None:
        wake = self.services.waiters.batches
        # a (re)started service tries every engine at once, its failed steps too: a
        # failure may have been this process's settings, fixed by the restart
        due = False
        while True:
            wake.clear()
            try:
                await self.run_once(due=due)
                due = True
            except Exception:
                log.exception("the regrade batch runner failed a round; retrying")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._poll):
                    await wake.wait()
