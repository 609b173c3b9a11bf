"""Grading workers: claim pending gradings with a lease, grade, store the result.

A grading whose judge could not be reached stays pending with the reason and is tried
again later; every other outcome (graded, or unscored for a reason retrying cannot
fix) is stored once, by the worker that still holds the lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta

from api.services import Services
from judge.calls import SamplingParams
from judge.errors import InputError, JudgeSpecError
from judge.grader import Grader
from judge.retry import RetryPolicy
from judge.verdict import GradingResult
from storage import Claim

__all__ = ["RETRY_LATER", "GradingWorkers", "new_worker_id"]

log = logging.getLogger("sre_judge.workers")

#: unscored reasons that mean "the judge is not there now": keep the grading pending
RETRY_LATER = frozenset({"judge_unavailable", "judge_timeout", "judge_rate_limited"})


def new_worker_id() -> str:
    """host:pid:random, unique per worker process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


def _unscored(claim: Claim, reason: str, detail: str) -> GradingResult:
    backend, _, model = claim.judge_spec.partition(":")
    return GradingResult(
        status="unscored",
        unscored_reason=reason,
        detail=detail,
        rubric_id=claim.rubric_id,
        rubric_version=claim.rubric_version,
        judge_backend=backend,
        judge_model=model.rpartition("@")[0] or model,
        review_reasons=("unscored",),
    )


class GradingWorkers:
    """Grading inside one process: one dispatcher claims work for up to ``count`` tasks.

    Claiming in batches for the free slots keeps database transactions per grading low;
    the dispatcher wakes when a submission arrives, when a slot frees, or every
    ``poll_seconds`` (work submitted through other processes).
    """

    def __init__(self, services: Services, *, count: int, worker_id: str | None = None) -> None:
        self.services = services
        self.count = count
        self.worker_id = worker_id or new_worker_id()
        self._dispatcher: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start the dispatcher."""
        if self._dispatcher is None and self.count > 0:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="grading-dispatcher")

    async def stop(self) -> None:
        """Stop taking work and cancel what is in flight (its leases expire and it is redone)."""
        tasks = [t for t in (self._dispatcher, *self._in_flight) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._dispatcher = None
        self._in_flight.clear()

    async def _dispatch(self) -> None:
        settings = self.services.settings
        wake = self.services.waiters.work
        while True:
            wake.clear()
            free = self.count - len(self._in_flight)
            claims: list[Claim] = []
            if free > 0:
                try:
                    claims = await self.services.store.claim_pending(
                        self.worker_id, limit=free, lease_seconds=settings.lease_seconds
                    )
                except Exception:
                    log.exception("claiming work failed")
            for claim in claims:
                task = asyncio.create_task(self.process(claim), name=f"grade-{claim.grading_id}")
                self._in_flight.add(task)
                task.add_done_callback(self._finished)
            if claims and len(claims) == free:
                continue  # there may be more; slots free up and set the wake event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=settings.poll_seconds)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._in_flight.discard(task)
        self.services.waiters.work.set()

    async def process(self, claim: Claim) -> None:
        """Grade one claimed grading and store the outcome."""
        store = self.services.store
        try:
            result = await self._grade(claim)
            if result.status == "unscored" and result.unscored_reason in RETRY_LATER:
                retry_at = datetime.now(UTC) + timedelta(
                    seconds=self.services.settings.judge_retry_seconds
                )
                await store.defer_grading(
                    claim.grading_id,
                    self.worker_id,
                    reason=f"{result.unscored_reason}: {result.detail or ''}".strip(": "),
                    retry_at=retry_at,
                    calls=list(result.calls),
                )
            else:
                await store.complete_grading(claim.grading_id, self.worker_id, result)
        except Exception:
            log.exception("grading %s failed; it will be retried", claim.grading_id)
            retry_at = datetime.now(UTC) + timedelta(
                seconds=self.services.settings.judge_retry_seconds
            )
            with contextlib.suppress(Exception):
                await store.defer_grading(
                    claim.grading_id,
                    self.worker_id,
                    reason="internal_error",
                    retry_at=retry_at,
                    calls=[],
                )
        finally:
            self.services.waiters.completed(claim.grading_id)

    async def _grade(self, claim: Claim) -> GradingResult:
        services = self.services
        rubric = await services.rubrics.resolve(claim.rubric_id, claim.rubric_version)
        if rubric is None:
            return _unscored(
                claim,
                "rubric_unknown",
                f"rubric {claim.rubric_id}@{claim.rubric_version} is not known",
            )
        try:
            backend = services.backends.get(claim.judge_spec)
        except JudgeSpecError as exc:
            return _unscored(claim, "judge_spec_invalid", str(exc))
        settings = services.settings
        grader = Grader(
            backend,
            params=SamplingParams(
                temperature=settings.judge_temperature,
                seed=settings.judge_seed,
                max_tokens=settings.judge_max_tokens,
            ),
            retry=RetryPolicy(max_attempts=settings.judge_max_attempts),
            max_text_bytes=settings.max_text_bytes,
        )
        async with services.backends.limit(claim.judge_spec):
            heartbeat = asyncio.create_task(self._heartbeat(claim.grading_id))
            try:
                result = await grader.grade(rubric, claim.ground_truth, claim.diagnosis)
            except InputError as exc:
                return _unscored(claim, "invalid_input", str(exc))
            finally:
                heartbeat.cancel()
        if result.calls:
            failed = result.unscored_reason in RETRY_LATER
            services.backends.record(
                claim.judge_spec, ok=not failed, reason=result.unscored_reason if failed else None
            )
        return result

    async def _heartbeat(self, grading_id: str) -> None:
        lease = self.services.settings.lease_seconds
        while True:
            await asyncio.sleep(lease / 3)
            await self.services.store.extend_lease(grading_id, self.worker_id, lease_seconds=lease)
