"""The import runner: one background task per process that runs queued import jobs.

It wakes when a job is queued in this process (``waiters.imports``) and otherwise
polls every :data:`POLL_SECONDS`, so jobs queued by another process, or left behind
by one that stopped, are found too. On stop, a job in flight is cancelled and given
back (queued again), so a restart resumes it at once: every job this runner holds, a
claim that committed as the stop cancelled it too. While a job runs its heartbeat is
beaten every quarter of :data:`STALE_SECONDS`, however long one batch takes (a strict
import writes its whole file in one); a job whose process died is taken over once its
heartbeat is older than :data:`STALE_SECONDS`.

A database fault that passes (a lock, a lost connection: :func:`database_fault`) stops
a job without failing it: the job is given back, its upload kept, and run again from the
top (imports are idempotent) after :data:`RETRY_SECONDS`, twice as long after each
further start. A job stopped so at its :data:`MAX_STARTS`-th start fails, saying why;
any other fault fails it at once. The runner holds one job at a time, so when the fault
outlasts the batch and its give-back fails too (or a claim or an ending fails), it gives
back every job still held under its id, with the pending ``error``, before it claims
again: tried every :data:`RETRY_SECONDS` until the database answers, never left
``running`` until its heartbeat goes stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from datetime import timedelta

from api.imports.job_queries import ImportJobQueries
from api.imports.jobs import ImportSuperseded, run_import_job
from api.service.background import BackgroundTask
from api.service.services import Services, new_worker_id
from storage.errors import database_fault
from storage.imports import ImportJobRecord

__all__ = ["MAX_STARTS", "POLL_SECONDS", "RETRY_SECONDS", "STALE_SECONDS", "ImportRunner"]

#: seconds between looks for jobs queued elsewhere
POLL_SECONDS = 5.0
#: a running job not heard of for this long is taken over
STALE_SECONDS = 300.0
#: starts of a job (``attempts``) after which a database fault fails it
MAX_STARTS = 5
#: seconds before a job given back after a database fault is claimed again, doubled at
#: each further start
RETRY_SECONDS = 1.0

log = logging.getLogger(__name__)


class ImportRunner(BackgroundTask):
    """Runs import jobs one at a time, in the background of a process with workers."""

    task_name = "import-runner"

    def __init__(self, services: Services, *, poll_seconds: float = POLL_SECONDS) -> None:
        """Run the jobs of ``services.store``; look for work every ``poll_seconds``."""
        super().__init__()
        self.services = services
        self.worker_id = f"import-{new_worker_id()}"
        self._poll = poll_seconds
        #: after a fault that escaped :meth:`run_once`, a job may still be held under
        #: this runner's id: the ``error`` to give it back with (None: keep its own) and
        #: the seconds to wait before the next claim; None when nothing is held
        self._unsettled: tuple[str | None, float] | None = None

    async def stop(self) -> None:
        """Cancel the task; a job in flight is queued again for the next process.

        Every job claimed under this runner's id is given back, not only the one it was
        known to run: a claim whose transaction was under way when the stop came commits
        all the same (``Database.run`` waits for it), and is given back too."""
        if self._task is None:
            return
        await super().stop()
        for job_id in await ImportJobQueries(self.services.store.db).release_all(self.worker_id):
            log.info("import job given back at shutdown", extra={"job_id": job_id})

    async def run_once(self) -> bool:
        """Claim and run one job; False when there was none."""
        jobs = ImportJobQueries(self.services.store.db)
        if self._unsettled is not None:
            await self._settle(jobs, *self._unsettled)
        stale = self.services.store.db.clock() - timedelta(seconds=STALE_SECONDS)
        job = await jobs.claim(self.worker_id, stale_before=stale)
        if job is None:
            return False
        pause = 0.0
        try:
            beat = STALE_SECONDS / 4  # three beats may fail before the job looks stopped
            await run_import_job(self.services, job, self.worker_id, beat_seconds=beat)
        except ImportSuperseded:
            log.warning("import job taken over by another process", extra={"job_id": job.id})
        except Exception as exc:
            pause = await self._stopped(jobs, job, exc)
        if pause:  # the database is in trouble: give it a moment before the next claim
            await asyncio.sleep(pause)
        return True

    async def _stopped(self, jobs: ImportJobQueries, job: ImportJobRecord, exc: Exception) -> float:
        """End or give back a job that ``exc`` stopped; the seconds to wait before the next
        claim (0: none). A passing database fault gives the job back to be run again, up
        to its :data:`MAX_STARTS`-th start; any other fault fails it."""
        if not database_fault(exc):
            log.exception("import job failed", extra={"job_id": job.id})
            await jobs.finish(job.id, self.worker_id, state="failed", error=repr(exc)[:500])
            return 0.0
        cause = getattr(exc, "orig", None) or exc  # the driver's words, not the statement
        fault = f"a database fault ({type(cause).__name__}: {str(cause)[:200]})"
        if job.attempts >= MAX_STARTS:
            log.error("import job failed: %s", fault, exc_info=exc, extra={"job_id": job.id})
            error = f"start {job.attempts} of at most {MAX_STARTS} stopped by {fault}; given up"
            await jobs.finish(job.id, self.worker_id, state="failed", error=error)
            return 0.0
        log.warning("import job stopped by %s; to be run again", fault, extra={"job_id": job.id})
        error = f"start {job.attempts} of at most {MAX_STARTS} stopped by {fault}; to be run again"
        pause = RETRY_SECONDS * 2.0 ** (job.attempts - 1)
        self._unsettled = (error, pause)  # kept should the give-back meet the fault too
        await jobs.release(job.id, self.worker_id, error=error)
        self._unsettled = None
        return pause

    async def _settle(self, jobs: ImportJobQueries, error: str | None, pause: float) -> None:
        """Give back every job still held under this runner's id after a fault escaped
        :meth:`run_once` (with ``error``, if any), then wait the ``pause`` that was due;
        raises while the database is still out of reach (tried again by :meth:`_loop`)."""
        for job_id in await jobs.release_all(self.worker_id, error=error):
            log.warning("import job given back after a fault", extra={"job_id": job_id})
        self._unsettled = None
        if pause:
            await asyncio.sleep(pause)

    async def _loop(self) -> None:
        wake = self.services.waiters.imports
        while True:
            wake.clear()
            try:
                while await self.run_once():
                    pass
            except Exception:
                log.exception("the import runner met a fault between jobs; retrying")
                if self._unsettled is None:  # a claim or an ending may have committed
                    self._unsettled = (None, 0.0)
            # a job this runner may hold is given back soon, not after a whole poll
            wait = self._poll if self._unsettled is None else min(self._poll, RETRY_SECONDS)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await wake.wait()
