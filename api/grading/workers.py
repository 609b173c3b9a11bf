"""Grading workers: claim pending gradings with a lease, grade, store the result.

A grading whose judge could not be reached stays pending with the reason and is tried
again later; every other outcome (graded, or unscored for a reason retrying cannot
fix) is stored once, by the worker that still holds the lease. An error of the
service's own is tried ``INTERNAL_ERROR_TRIES`` times in all, then the grading is
unscored (``internal_error``): a fault that repeats must not ask the judge for ever.
Nor must one that kills the worker: a grading that has lost ``WORKER_LOSSES`` workers
(each claim's lease ran out with no outcome stored) is unscored the same way when next
claimed, without asking the judge.

A fault of the database's reach while an outcome is stored (``database_fault``: a lock,
a dropped connection) is not the service's own error: the same outcome is stored again
after a short pause, the judge not asked again, for as long as the lease holds and at
most a lease's length. A database away longer leaves the grading to another claim (its
lease runs out: a lost worker), with no ``internal_error`` try counted.

Shutdown (SIGTERM) is graceful: ``begin_shutdown`` stops claiming at once; ``stop``
lets in-flight gradings finish until ``shutdown_seconds`` after that, then cancels
those still waiting for the judge and releases their leases, so another process (or
a restart) takes them at once. A grading being stored is never cancelled.

Why this module is long: it is one piece, the life of a claim in this process (claimed,
or handed over at intake; graded; stored or deferred; cut and given back at shutdown)
over the slots, leases and deadline those steps share. Split, each part would reach
into the others' state.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import heapq
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from api.grading import self_preference
from api.grading.confirmation import ConfirmationFailed, confirmed
from api.grading.group_commit import GroupCommit
from api.grading.judge_moves import follow_on_claim
from api.grading.regrade_fast import FastRegrade
from api.service.background import cancel_and_wait
from api.service.judging import (
    RETRY_LATER,
    build_grader,
    pending_reason,
    unscored_result,
    waiting_code,
)
from api.service.metrics import Metrics
from api.service.observability import bind_log_context, log_grading
from api.service.qualification import Qualifications
from api.service.services import Services, new_worker_id
from judge.backends.http import MAX_RETRY_AFTER
from judge.calls import JudgeCall
from judge.errors import InputError, JudgeSpecError
from judge.grader import GradingFailed
from judge.rubric import Rubric
from judge.spec import member_specs
from judge.verdict import GradingResult
from storage import Claim, FinishedGrading
from storage.errors import database_fault
from storage.queue import INTERNAL_ERROR, Deferral
from storage.regrade.batch_answers import batch_answers

__all__ = ["GradingWorkers"]

#: what a write or read retried past database faults answers
_Answer = TypeVar("_Answer")

log = logging.getLogger("sre_judge.workers")

#: how many times a grading is tried when the service itself fails to grade it (an
#: unexpected error, not the judge's): deferred until the last, then unscored
INTERNAL_ERROR_TRIES = 3
#: how many workers a grading may lose (each claim ended with its lease run out and no
#: outcome stored: the process killed by the OOM killer, a liveness probe or a crash it
#: did not survive) before its next claim unscores it (``internal_error``) without
#: asking the judge. As ``INTERNAL_ERROR_TRIES``: a fault that kills the worker is the
#: service's own and, if it repeats, must not ask the judge for ever, while one or two
#: losses are what a node lost or a process killed during a deploy costs the gradings it
#: held (a graceful shutdown gives its leases back: no loss). Losses are counted apart
#: from the errors a worker lived to record: a worker killed writes nothing.
WORKER_LOSSES = 3
#: the pause before an outcome whose store met a database fault is stored again; it
#: doubles with each fault, up to ``STORE_RETRY_MAX_SECONDS``
STORE_RETRY_SECONDS = 0.1
STORE_RETRY_MAX_SECONDS = 5.0


@dataclass
class _Lease:
    """Until when (the event loop's clock) this worker knows it holds a claim's lease:
    moved on by each extension of the heartbeat; 0 once the heartbeat found it lost."""

    until: float


class GradingWorkers:
    """Grading inside one process: one dispatcher claims work for up to ``count`` tasks.

    Claiming in batches for the free slots keeps database transactions per grading low;
    the dispatcher wakes when a submission arrives, when a slot frees, or every
    ``poll_seconds`` (work submitted through other processes).
    """

    def __init__(
        self,
        services: Services,
        *,
        count: int,
        worker_id: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.services = services
        self.count = count
        self.worker_id = worker_id or new_worker_id()
        self.metrics = metrics or Metrics()
        self._dispatcher: asyncio.Task[None] | None = None
        self._in_flight: dict[asyncio.Task[None], str] = {}
        #: gradings whose outcome is being written: never cancelled
        self._storing: set[str] = set()
        self._deadline: float | None = None
        self._qualifications = Qualifications(
            services.store,
            services.settings,
            digests=services.backends.digests,
            changes=lambda: services.qualification_changes,
        )
        #: whether the last claim may have left claimable work behind (see ``_finished``);
        #: until the first claim, work of an earlier run may wait (intake hands none over)
        self._backlog = True
        #: when the gradings this process deferred are due again (loop times, a heap):
        #: from the earliest on, older work is waiting, so intake hands nothing over
        self._due: list[float] = []
        #: slots held for gradings being leased at intake (see ``reserve``)
        self._reserved = 0
        #: slots the dispatcher's claim under way is filling (see ``_claim``): not free
        self._claiming = 0
        #: the context the workers' tasks run in (the one they were started in)
        self._context = contextvars.copy_context()
        #: verdicts finished together are stored in one transaction
        self._commits = GroupCommit(services.store.queue, services.rubrics.current)
        self._fast = FastRegrade(services, self._review_marks, self._account, self._landed)

    @property
    def in_flight(self) -> int:
        """Gradings being worked on now."""
        return len(self._in_flight)

    @property
    def stopping(self) -> bool:
        """Whether shutdown has begun (no more work is claimed)."""
        return self._deadline is not None

    def start(self) -> None:
        """Start the dispatcher."""
        if self._dispatcher is None and self.count > 0 and not self.stopping:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="grading-dispatcher")
            # work handed over by a request runs in this context, not the request's
            self._context = contextvars.copy_context()
            self.services.handoff = self

    def reserve(self) -> tuple[str, float] | None:
        """A free slot for a grading that intake leases to this worker in the submission's
        transaction: ``(worker id, lease seconds)``, or None when every slot is taken, when
        claimable work may be waiting (older work goes first) or when shutting down."""
        if self.stopping or self._dispatcher is None or self._backlog or self._free() <= 0:
            return None
        if self._due and asyncio.get_running_loop().time() >= self._due[0]:
            self.services.waiters.work.set()  # the deferred grading first: claimed now
            return None
        self._reserved += 1
        return self.worker_id, self.services.settings.lease_seconds

    def _free(self) -> int:
        """Slots free now: not grading, not held for intake, not being filled by a claim."""
        return self.count - len(self._in_flight) - self._reserved - self._claiming

    def take(self, claim: Claim | None) -> None:
        """Grade ``claim``, leased at intake with a slot from ``reserve``; None frees the
        slot (the submission was a replay or was not stored)."""
        self._reserved -= 1
        if claim is None:
            return
        if self.stopping:  # shutdown began meanwhile: give the lease back at once
            self._start(self._give_back(claim.grading_id), claim.grading_id, name="release")
            return
        self._start(self.process(claim), claim.grading_id, name="grade")

    def give_back(self, grading_id: str) -> None:
        """Free a slot from ``reserve`` whose store did not answer (cancelled, or failed after
        the commit perhaps); ``grading_id``, if stored leased here, is released at once."""
        self._reserved -= 1
        self._start(self._give_back(grading_id), grading_id, name="release")

    async def _give_back(self, grading_id: str) -> None:
        """Release the lease on ``grading_id`` (from intake); wake the workers to claim it."""
        if await self._release(grading_id) and not self.stopping:
            self._backlog = True  # claimable now: claimed before intake hands more over
            self.services.waiters.work.set()

    def _start(self, work: Coroutine[Any, Any, None], grading_id: str, *, name: str) -> None:
        """Run ``work`` on ``grading_id`` as an in-flight task of this worker."""
        task = asyncio.create_task(work, name=f"{name}-{grading_id}", context=self._context.copy())
        self._in_flight[task] = grading_id
        task.add_done_callback(self._finished)

    def begin_shutdown(self) -> None:
        """Stop claiming work; what is in flight may finish until ``shutdown_seconds`` from now."""
        if self.services.handoff is self:
            self.services.handoff = None
        if self._deadline is None:
            self._deadline = time.monotonic() + self.services.settings.shutdown_seconds
            in_flight = {"in_flight": len(self._in_flight)}
            log.info("shutting down: no more work is claimed", extra=in_flight)
        self.services.waiters.work.set()

    async def stop(self) -> None:
        """Stop taking work, let in-flight gradings finish until the deadline, release the rest.

        Afterwards each grading this worker had claimed is stored, or pending with no
        lease (a restart takes it at once): every lease held under its id is given back,
        also those of a claim (live, or regrade items of the fast path) that the deadline
        cut while its transaction ran, which commits all the same (``Database.run`` waits
        for it) and whose gradings no task took.
        """
        self.begin_shutdown()
        assert self._deadline is not None
        held = self._dispatcher is not None or bool(self._in_flight)  # else nothing claimed
        if self._dispatcher is not None:
            await self._settle(self._dispatcher, self._deadline)
            self._dispatcher = None
        tasks = dict(self._in_flight)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=max(0.0, self._deadline - time.monotonic()))
            for task in late:
                if tasks[task] not in self._storing:
                    task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        self._in_flight.clear()
        if not held:
            return
        try:  # never the lease of a grading being stored
            async with asyncio.timeout(10):
                queue = self.services.store.queue
                released = await queue.release_held(self.worker_id, keep=set(self._storing))
        except Exception:
            log.exception("releasing the leases held at shutdown failed; they will expire")
            return
        for grading_id in released:
            self.metrics.gradings_released.inc()
            with bind_log_context(grading_id=grading_id):
                log.info("lease released unfinished at shutdown")

    @staticmethod
    async def _settle(task: asyncio.Task[None], deadline: float) -> None:
        """Wait for the dispatcher to see the flag and return; cancel it past the deadline."""
        wait = max(0.1, deadline - time.monotonic())
        await asyncio.wait({task}, timeout=wait)
        await cancel_and_wait(task)

    async def _release(self, grading_id: str) -> bool:
        """Give a grading back unfinished (shutdown, ``give_back``); whether it was leased here."""
        with bind_log_context(grading_id=grading_id):
            try:
                async with asyncio.timeout(10):
                    released = await self.services.store.queue.release_lease(
                        grading_id, self.worker_id
                    )
            except Exception:
                log.exception("releasing the lease failed; it will expire")
                return False
            if released and self.stopping:
                self.metrics.gradings_released.inc()
                log.info("lease released unfinished at shutdown")
            elif released:
                log.info("lease released: the request that stored it did not hand it over")
            return released

    async def _dispatch(self) -> None:
        settings = self.services.settings
        wake = self.services.waiters.work
        while not self.stopping:
            wake.clear()
            free = self._free()
            # the claims, how many are live, whether the fast path's batch was full
            claims, live, fast = await self._claim(free) if free > 0 else ([], 0, False)
            # work may be left unclaimed: no slot was free, or every free slot was filled
            full = free > 0 and (fast or live == free)
            self._backlog = free == 0 or full
            now = asyncio.get_running_loop().time()
            while free > 0 and self._due and self._due[0] <= now:
                heapq.heappop(self._due)  # looked for with a slot free: claimed if claimable
            if self.stopping:  # claimed while shutdown began: give them back at once
                for claim in claims:
                    await self._release(claim.grading_id)
                return
            for claim in claims:
                self._start(self.process(claim), claim.grading_id, name="grade")
            if full:
                continue  # there may be more; slots free up and set the wake event
            timeout = settings.poll_seconds
            if self._due:  # wake when a deferral of this process is due
                timeout = max(0.0, min(timeout, self._due[0] - now))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await wake.wait()

    async def _claim(self, free: int) -> tuple[list[Claim], int, bool]:
        """Claim work for ``free`` slots: the claims, how many are live gradings, and
        whether the fast path's batch was full.

        Live work first; the fast path's misses take only the slots left. The slots
        stay taken while the claim runs (``reserve`` hands none of them to intake, whose
        submission the next round claims instead), until the caller starts the claims'
        tasks with no await in between: a slot is never filled twice.
        """
        claims: list[Claim] = []
        live, fast = 0, False
        self._claiming = free
        try:
            claims = await self.services.store.queue.claim_pending(
                self.worker_id, limit=free, lease_seconds=self.services.settings.lease_seconds,
                regrade=False,
            )  # fmt: skip
            live = len(claims)
            misses, fast = await self._fast.run(self.worker_id, free - live)
            claims += misses
        except Exception:
            log.exception("claiming work failed")
        finally:
            self._claiming = 0
        return claims, live, fast

    def _deferred_until(self, retry_at: datetime) -> None:
        """Note that a grading this process deferred is due again at ``retry_at``."""
        wait = max(0.0, (retry_at - datetime.now(UTC)).total_seconds())
        heapq.heappush(self._due, asyncio.get_running_loop().time() + wait)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.pop(task, None)
        if self._backlog:  # the freed slot can take work left pending; else nothing to look for
            self.services.waiters.work.set()

    async def process(self, claim: Claim) -> None:
        """Grade one claimed grading and store the outcome."""
        with bind_log_context(grading_id=claim.grading_id):
            await self._process(claim)

    async def _process(self, claim: Claim) -> None:
        # the lease is kept for as long as this worker holds the claim: asking the judge,
        # a confirming judge and the store (the group commit may wait its turn)
        lease = _Lease(asyncio.get_running_loop().time() + self.services.settings.lease_seconds)
        heartbeat = asyncio.create_task(self._heartbeat(claim.grading_id, lease))
        result: GradingResult | None = None  # once the judge has been asked
        try:
            if claim.lost_workers >= WORKER_LOSSES:
                await self._lost_too_often(claim, lease)
                return
            followed = await follow_on_claim(self.services, claim, self.worker_id)
            if followed is None:  # the lease was lost: another worker has it
                return
            claim = followed
            # resolved once per claim: for the grading and for the review marks
            rubric = await self.services.rubrics.resolve(claim.rubric_id, claim.rubric_version)
            result = await self._grade(claim, rubric)
            if result.status == "unscored" and result.unscored_reason in RETRY_LATER:
                retry_at = datetime.now(UTC) + timedelta(
                    seconds=_retry_wait(result, self.services.settings.judge_retry_seconds)
                )
                reason = pending_reason(result)
                # being stored from here: a shutdown waits for it instead of cutting it
                self._storing.add(claim.grading_id)
                outcome = await self._deferred(claim, lease, reason, retry_at, list(result.calls))
                self._account(result, outcome, pending=reason)
            else:
                result, provisional = await self._review_marks(claim, rubric, result)
                # (a confirming judge may be asked: a shutdown cuts that off as any judge)
                result = await confirmed(self.services, self._qualifications, claim, rubric, result)
                self._storing.add(claim.grading_id)
                finished = FinishedGrading(
                    claim.grading_id,
                    self.worker_id,
                    result,
                    provisional,
                    judge_digest=self.services.backends.digest_of(claim.judge_spec),
                    claim_count=claim.claim_count,
                )
                stored = await self._stored(claim, lease, lambda: self._commits.complete(finished))
                self._account(result, "completed" if stored else "discarded")
        except Exception as exc:
            await self._failed(claim, lease, result, exc)
        finally:
            heartbeat.cancel()
            self._storing.discard(claim.grading_id)
            self.services.waiters.completed(claim.grading_id)

    async def _stored(
        self, claim: Claim, lease: _Lease, write: Callable[[], Awaitable[bool]]
    ) -> bool | None:
        """Run ``write``, which stores ``claim``'s outcome: whether it stored it, or None
        when the database did not take it or did not say whether it had.

        A fault of the database's reach (``database_fault``) passes: ``write`` runs again
        after a pause (``STORE_RETRY_SECONDS``, doubling) while ``lease`` holds (the
        heartbeat extends it meanwhile), for at most a lease's length and, once shutdown
        began, not past its deadline. Each run checks the lease under a row lock in the
        transaction that writes, so no run stores a second outcome (one whose commit went
        through unacknowledged is found done, and refused: :meth:`_landed` then tells
        whether it was this claim's outcome). Given up writing, the grading is left to its
        lease, which runs out: a lost worker, not an ``internal_error`` try, and a fault
        that never passes is bounded by ``WORKER_LOSSES``. Any other error is raised.
        """
        give_up = asyncio.get_running_loop().time() + self.services.settings.lease_seconds
        done, stored, fault = await self._past_faults(
            write, lambda: min(lease.until, give_up), "storing the outcome of", claim
        )
        if done:  # a refusal after a fault: the faulted write may have landed unacknowledged
            return stored if stored or fault is None else await self._landed(claim)
        log.error(
            "the database did not take the outcome of %s; its lease runs out and another "
            "claim grades it", claim.grading_id, exc_info=fault,
        )  # fmt: skip
        return None

    async def _past_faults(
        self,
        attempt: Callable[[], Awaitable[_Answer]],
        until: Callable[[], float],
        doing: str,
        claim: Claim,
    ) -> tuple[bool, _Answer | None, Exception | None]:
        """Run ``attempt`` until it answers, again after a pause (``STORE_RETRY_SECONDS``,
        doubling) each time a fault of the database's reach (``database_fault``) stops it,
        while a pause ends before ``until()`` (the event loop's clock, read again each
        time: a lease the heartbeat extends) and, once shutdown began, before its deadline.
        Whether it answered, its answer, and the last fault met (None: none). Any other
        error is raised."""
        pause = STORE_RETRY_SECONDS
        fault: Exception | None = None
        while True:
            try:
                return True, await attempt(), fault
            except Exception as exc:
                if not database_fault(exc):
                    raise
                fault = exc
            if not self._may_pause(pause, until()):
                return False, None, fault
            log.warning(
                "%s %s met a database fault (%s); again in %.1fs",
                doing, claim.grading_id, type(fault).__name__, pause,
            )  # fmt: skip
            await asyncio.sleep(pause)
            pause = min(2 * pause, STORE_RETRY_MAX_SECONDS)

    def _may_pause(self, pause: float, until: float) -> bool:
        """Whether a store met by a database fault may pause ``pause`` seconds and try
        again: ending before ``until`` (the event loop's clock) and, once shutdown began,
        before its deadline."""
        shutdown = self._deadline is not None and time.monotonic() + pause >= self._deadline
        return not shutdown and asyncio.get_running_loop().time() + pause < until

    async def _deferred(
        self,
        claim: Claim,
        lease: _Lease,
        reason: str,
        retry_at: datetime,
        calls: list[JudgeCall],
    ) -> str:
        """Store ``claim`` deferred until ``retry_at`` for ``reason`` with the judge
        ``calls`` made (:meth:`_stored`); what became of it, as :meth:`_account` counts it:
        ``"deferred"`` (the dispatcher wakes then), ``"cancelled"`` (an item of a regrade
        job cancelled meanwhile: nothing retries it, nothing wakes) or ``"discarded"`` (the
        database did not take it). A deferral whose commit went through unacknowledged is
        counted deferred: whether its job's cancel took the item then is not read again."""
        store = self.services.store
        done: list[Deferral] = []

        async def defer() -> bool:
            outcome = await store.queue.defer(
                claim.grading_id,
                self.worker_id,
                reason=reason,
                retry_at=retry_at,
                calls=calls,
                claim_count=claim.claim_count,
            )
            done[:] = [outcome] if outcome is not None else []
            return outcome is not None

        if not await self._stored(claim, lease, defer):
            return "discarded"
        outcome = done[0] if done else "deferred"
        if outcome == "deferred":
            self._deferred_until(retry_at)
        return outcome

    async def _landed(self, claim: Claim) -> bool | None:
        """Whether ``claim``'s outcome is stored although a write of it met a database
        fault and the next was refused: its commit went through unacknowledged. Asked of
        this claim's own outcome in the audit log, not of the grading as it stands now,
        which a later claim may hold already (a deferral due again while the store
        retried). A read that meets a database fault is made again as :meth:`_stored`
        writes (the lease no bound: a read changes nothing); None when none could be
        made within a lease's length: the outcome is then counted discarded (the metric
        of results not known to be stored), never stored on a guess. Any other error is
        raised."""
        give_up = asyncio.get_running_loop().time() + self.services.settings.lease_seconds
        queue = self.services.store.queue
        done, stored, fault = await self._past_faults(
            lambda: queue.outcome_stored(
                claim.grading_id, self.worker_id, claim_count=claim.claim_count
            ),
            lambda: give_up,
            "reading whether it stored the outcome of",
            claim,
        )
        if done:
            return stored
        log.error(
            "whether the outcome of %s was stored could not be read; counted discarded",
            claim.grading_id, exc_info=fault,
        )  # fmt: skip
        return None

    async def _failed(
        self,
        claim: Claim,
        lease: _Lease,
        result: GradingResult | None,
        error: Exception,
    ) -> None:
        """An unexpected error while grading ``claim``: deferred for another try or, at the
        last of ``INTERNAL_ERROR_TRIES``, unscored with reason ``internal_error``.

        Either way the judge calls of ``result`` (when the judge was asked) and the replies
        that came back are stored, so a deterministic fault neither asks a paid judge for
        ever nor loses the prompts it sent: those of a grader that failed after asking
        too, which a ``GradingFailed`` brings with the error it wraps (the grading's judge
        or the confirming judge), and a confirming judge's, which a
        ``ConfirmationFailed`` brings. Only the error's type reaches the grading's detail;
        its message (which may quote a hidden ground truth) stays in the log.
        """
        store = self.services.store
        calls = list(result.calls) if result is not None else []
        if isinstance(error, ConfirmationFailed):  # the confirming judge had answered
            calls, error = list(error.calls), error.error
        elif isinstance(error, GradingFailed):  # calls made before the fault, not in result
            calls, error = [*calls, *error.calls], error.error
        try:
            tries = await store.queue.internal_errors(claim.grading_id) + 1
            if tries >= INTERNAL_ERROR_TRIES:
                log.error(
                    "grading %s failed %d times; it is unscored", claim.grading_id, tries,
                    exc_info=error,
                )  # fmt: skip
                detail = (
                    f"the service failed to grade this {tries} times "
                    f"({type(error).__name__}); the server's log has the error"
                )
                await self._internal_error(claim, lease, detail, calls)
                return
            log.error(
                "grading %s failed (try %d of %d); it will be retried",
                claim.grading_id, tries, INTERNAL_ERROR_TRIES, exc_info=error,
            )  # fmt: skip
            retry_at = datetime.now(UTC) + timedelta(
                seconds=self.services.settings.judge_retry_seconds
            )
            reason = f"{INTERNAL_ERROR}: service error (try {tries} of {INTERNAL_ERROR_TRIES})"
            outcome = await self._deferred(claim, lease, reason, retry_at, calls)
            # counted as the judge-outage path counts: the calls asked, and a deferral
            # only when the queue kept it (a lease another worker took refuses it)
            retry = unscored_result(claim, INTERNAL_ERROR, reason)
            retry = retry.model_copy(update={"calls": tuple(calls)})
            self._account(retry, outcome, pending=reason)
        except Exception:  # the database itself may be what failed: the lease expires
            log.exception("recording the failure of %s failed; it will be claimed again",
                          claim.grading_id)  # fmt: skip

    async def _lost_too_often(self, claim: Claim, lease: _Lease) -> None:
        """Unscore ``claim``, whose grading has lost ``WORKER_LOSSES`` workers or more,
        with reason ``internal_error`` and no judge asked: grading it kills the worker,
        or keeps it from storing anything."""
        lost = claim.lost_workers
        log.error(
            "grading %s: its worker stopped %d times while grading it; it is unscored",
            claim.grading_id, lost,
        )  # fmt: skip
        detail = (
            f"its worker stopped {lost} times while grading this (killed, or cut off "
            "from the database, before it stored an outcome); the judge was not asked again"
        )
        self._storing.add(claim.grading_id)  # being stored: a shutdown waits for it
        await self._internal_error(claim, lease, detail, [])

    async def _internal_error(
        self, claim: Claim, lease: _Lease, detail: str, calls: list[JudgeCall]
    ) -> None:
        """Store ``claim`` unscored with reason ``internal_error``, ``detail`` and the
        judge ``calls`` its last try made."""
        unscored = unscored_result(claim, INTERNAL_ERROR, detail)
        unscored = unscored.model_copy(update={"calls": tuple(calls)})
        provisional = await self._provisional(claim, unscored)
        finished = FinishedGrading(
            claim.grading_id, self.worker_id, unscored, provisional, claim_count=claim.claim_count
        )
        stored = await self._stored(claim, lease, lambda: self._commits.complete(finished))
        self._account(unscored, "completed" if stored else "discarded")

    async def _provisional(self, claim: Claim, result: GradingResult) -> bool:
        """Whether ``claim``'s judge is provisional, as every grading of it is marked,
        unscored ones too; provisional when that cannot be looked up (the fault may be
        the lookup's)."""
        try:
            rubric = await self.services.rubrics.resolve(claim.rubric_id, claim.rubric_version)
            return (
                await self._qualifications.mark(claim.grading_id, claim.judge_spec, rubric, result)
            )[1]
        except Exception:
            return True

    async def _review_marks(
        self, claim: Claim, rubric: Rubric | None, result: GradingResult
    ) -> tuple[GradingResult, bool]:
        """Self-preference and provisional (judge not qualified) marks, and provisional."""
        result = self_preference.flag(result, claim.judge_spec, claim.agent_model)
        return await self._qualifications.mark(claim.grading_id, claim.judge_spec, rubric, result)

    def _account(self, result: GradingResult, stored: str, *, pending: str | None = None) -> None:
        """Metrics, and a log line per judge call and for the outcome (``pending``: the
        reason a deferred grading waits). ``stored``: ``"completed"``, ``"deferred"``,
        ``"discarded"`` or ``"cancelled"`` (an item its regrade job's cancel took when it
        came back unfinished: its judge calls count, no grading outcome does)."""
        if stored == "cancelled":
            self.metrics.record_calls(result)
        else:
            self.metrics.record_grading(result, stored=stored)
        log_grading(log, result, stored, pending_reason=pending)

    async def _grade(self, claim: Claim, rubric: Rubric | None) -> GradingResult:
        """Grade (the calls whose replies the judge cache keeps carry their key)."""
        services = self.services
        if rubric is None:
            return unscored_result(
                claim,
                "rubric_unknown",
                f"rubric {claim.rubric_id}@{claim.rubric_version} is not known",
            )
        # an item of a job graded through a batch engine is answered from its replies
        answers = None
        if claim.regrade_job_id is not None:
            answers = await services.store.db.run_read(batch_answers, claim.grading_id)
        try:
            grader = build_grader(
                services,
                claim.judge_spec,
                answers=answers,
                namespace=claim.cache_namespace,
                regrade=claim.regrade_job_id is not None,
                reads_cache=claim.reads_cache,
            )
        except JudgeSpecError as exc:
            return unscored_result(claim, "judge_spec_invalid", str(exc))
        # the judge's concurrency limit bounds its requests only (LimitedBackend)
        try:
            result = await grader.grade(
                rubric, claim.ground_truth, claim.diagnosis, screening=claim.screened()
            )
        except InputError as exc:
            return unscored_result(claim, "invalid_input", str(exc))
        try:  # the judge was asked: a fault from here keeps its calls
            await self._judges_seen(claim, result)
        except Exception as exc:
            raise GradingFailed(exc, result.calls) from exc
        return result

    async def _judges_seen(self, claim: Claim, result: GradingResult) -> None:
        """Follow the judges' digests and health from ``result``'s calls."""
        services = self.services
        # before the marks: a model seen replaced makes this grading provisional
        await services.backends.follow_digests(claim.judge_spec, result.calls)
        # each judge's health from its own calls: a panel member is failing when its
        # last call failed in a way retrying later fixes, whatever became of the others'.
        # Only calls that reached it say so: a reply from the judge cache or a batch's
        # kept replies says nothing of whether it answers now (``/readyz`` trusts this)
        for spec in member_specs(claim.judge_spec):
            calls = [c for c in services.backends.calls_of(spec, result.calls) if _reached(c)]
            if calls:
                failure = calls[-1].error_code
                failed = failure in RETRY_LATER
                reason = waiting_code(failure) if failed else None
                services.backends.record(spec, ok=not failed, reason=reason)

    async def _heartbeat(self, grading_id: str, lease: _Lease) -> None:
        """Extend this worker's ``lease`` on ``grading_id`` every third of a lease until
        cancelled; a failed extension is logged and tried again at the next beat."""
        seconds = self.services.settings.lease_seconds
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(seconds / 3)
            asked = loop.time()
            try:
                held = await self.services.store.queue.extend_lease(
                    grading_id, self.worker_id, lease_seconds=seconds
                )
            except Exception:
                log.exception("extending the lease of %s failed", grading_id)
                continue
            lease.until = asked + seconds if held else 0.0


def _reached(call: JudgeCall) -> bool:
    """Whether ``call`` asked the live judge: not answered from the judge cache nor from
    a batch engine's kept replies (whose ``Completion.via`` names the batch)."""
    return not call.cached and (call.completion is None or call.completion.via is None)


def _retry_wait(result: GradingResult, seconds: float) -> float:
    """How long a deferred grading waits: ``seconds``, or longer where the judge asked
    for it (``Retry-After`` of its last failed attempts): never back before it said, nor
    later than ``MAX_RETRY_AFTER`` (a day), which any date can hold."""
    asked = [
        min(a.retry_after, MAX_RETRY_AFTER)
        for c in result.calls
        for a in c.attempts
        if a.retry_after and not math.isnan(a.retry_after)
    ]
    return max([seconds, *asked])
