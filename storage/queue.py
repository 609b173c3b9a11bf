"""The durable work queue of pending gradings, with leases.

A worker claims pending gradings with a lease (``SELECT ... FOR UPDATE SKIP LOCKED`` on
PostgreSQL; SQLite's ``BEGIN IMMEDIATE`` serializes claimers). A dead worker's lease
expires and the grading is claimed again. A verdict is only written by the worker that
holds the lease of a still-pending grading, checked under a row lock in the same
transaction as the write, so nothing is graded twice into two verdicts.

Leases are bookkeeping: claiming and extending do not bump ``revision`` (the ETag of
what a grading says); completing and deferring do. A regrade item that comes back
unfinished (deferred, or its lease given back) while its job is cancelled is cancelled
in the same transaction (``storage.regrade.lifecycle.cancel_given_back``); so is, by the
next claim that may take regrade items, one whose worker was killed and whose lease ran
out (``storage.regrade.lifecycle.abandoned_items``).

A claim that takes a grading whose lease ran out while its worker held it (no outcome
stored, the lease not given back: the worker was killed, or cut off from the database)
audits that loss (``LEASE_EXPIRED``) and tells the new worker how many workers the
grading has lost (``Claim.lost_workers``), so that one a worker never survives is not
graded for ever (``api.grading.workers``). A judge move, a regrade job's cancel and the
sweep take such a grading from its lost worker and audit the loss themselves
(``storage.lost_workers``): its lease then names no holder but keeps its expiry, and the
next claim counts the loss all the same (after a resume, for a cancelled item).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, NamedTuple

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    func,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.calls import JudgeCall
from judge.rubric import Rubric
from judge.verdict import GradingResult
from storage.canonical import iso_utc
from storage.claims import claim_of, claimable_query
from storage.database import AuditBatch, Database
from storage.lost_workers import LEASE_EXPIRED, workers_lost
from storage.models import Claim, FinishedGrading
from storage.regrade.lifecycle import (
    abandoned_items,
    cancel_abandoned,
    cancel_given_back,
    items_completed,
    lock_items,
    mark_jobs_started,
    not_held_back,
)
from storage.regrade.tables import RegradeJobRecord
from storage.tables import AuditRecord, GradingRecord, SubmissionRecord
from storage.verdicts import call_events, call_records, leased, store_calls, write_verdicts

__all__ = ["INTERNAL_ERROR", "LEASE_EXPIRED", "Deferral", "QueueRepository"]

#: the code a grading is deferred or unscored under when the service itself failed to
#: grade it (an error of its own, not the judge's)
INTERNAL_ERROR = "internal_error"
#: what a deferral did: kept the grading pending, or cancelled its cancelled job's item
Deferral = Literal["deferred", "cancelled"]
#: the audit events of a claim's stored outcome: a deferral, or a verdict
_OUTCOMES = ("grading.deferred", "grading.completed", "grading.unscored")
#: a claim's pick: claimable gradings with their submissions, ground truths and the roles
#: of the tokens that sent them
_Pick = Select[GradingRecord, SubmissionRecord, str, str]
#: a claim's sweep: the cancelled jobs' abandoned items
_Sweep = Select[GradingRecord]


class _Statements(NamedTuple):
    """What a kind of claim runs, built once (``QueueRepository._statements``)."""

    #: the claimable gradings
    pick: _Pick
    #: whether there is one, or one to sweep (SQLite's look without the write lock)
    probe: Select[bool]
    #: the abandoned items of cancelled jobs to cancel first; None for live claims only
    sweep: _Sweep | None


class QueueRepository:
    """Claiming, completing and deferring pending gradings.

    Items of regrade jobs are gradings too: items of paused or cancelled jobs are held
    back, and claiming or completing items moves their jobs on
    (``storage.regrade.lifecycle``) in the queue's transaction.
    """

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        #: per kind of claim (``regrade``): whether the last one filled its limit, so the
        #: queue likely holds more and the next claim need not look before it leases
        self._backlog: dict[bool | None, bool] = {}
        #: per kind of claim: its statements (``_statements``)
        self._built: dict[bool | None, _Statements] = {}

    async def claim_pending(
        self, worker_id: str, *, limit: int, lease_seconds: float, regrade: bool | None = None
    ) -> list[Claim]:
        """Lease up to ``limit`` claimable gradings to ``worker_id``, oldest first.

        ``regrade``: True to claim regrade job items only, False live gradings only.

        Claimable: pending, not leased (or the lease expired) and not deferred to later.
        Two statements: the pick (with the submissions) and the lease. A claim that may
        take regrade items first cancels, in the same transaction, the items of cancelled
        jobs whose worker was killed (their lease ran out): nothing else would.
        """
        now = self._db.clock()
        expires = now + timedelta(seconds=lease_seconds)
        built = self._statements(regrade)
        values = {"now": now, "limit": limit}
        # SQLite writes take the database lock: look without it first, so that idle
        # workers polling an empty queue never block submissions (while a backlog lasts,
        # each claim finds work: it leases at once)
        look = not self._db.postgres and not self._backlog.get(regrade)
        if look and not await self._db.run_read(_finds_work, built.probe, values):
            return []
        claims = await self._db.run(self._lease, built, values, worker_id, expires)
        self._backlog[regrade] = len(claims) >= limit
        return claims

    def _statements(self, regrade: bool | None) -> _Statements:
        """The statements of a kind of claim, built once: ``now`` and ``limit`` are
        bound on each run (building them cost more than running them). Claims of live
        gradings only sweep nothing: they stay two statements to lease. Every look is one
        statement."""
        built = self._built.get(regrade)
        if built is None:
            now: BindParameter[datetime] = bindparam("now")
            limit: BindParameter[int] = bindparam("limit")
            pick = claimable_query(now, limit, not_held_back(), regrade=regrade)
            sweep = abandoned_items(now) if regrade is not False else None
            first = pick.with_only_columns(col(GradingRecord.id)).order_by(None).limit(1)
            found = [first.exists(), *([sweep.exists()] if sweep is not None else [])]
            probe = select(or_(*found))
            if self._db.postgres:
                pick = pick.with_for_update(skip_locked=True, of=GradingRecord)
                if sweep is not None:
                    sweep = sweep.with_for_update(skip_locked=True, of=GradingRecord)
            built = self._built[regrade] = _Statements(pick, probe, sweep)
        return built

    def _lease(
        self,
        session: Session,
        built: _Statements,
        values: dict[str, Any],
        worker_id: str,
        expires: datetime,
    ) -> list[Claim]:
        """Cancel the abandoned items of cancelled jobs, then lease what the pick finds
        to ``worker_id`` until ``expires``; the claims.

        The items swept are row-locked first (skipping rows another claim holds) and
        their audit appended last, after the leases' and the jobs' rows (see
        ``storage.database``), with the losses of their workers and of those whose
        claims are taken over."""
        audited = AuditBatch()
        if built.sweep is not None:
            abandoned = list(session.execute(built.sweep, values).scalars())
            cancel_abandoned(self._db, session, abandoned, worker_id, into=audited)
        claims = self._leased(session, built.pick, values, worker_id, expires, into=audited)
        if audited.events:
            self._db.audit_many(session, audited.events, audited.covers, audited.rows)
        return claims

    def _leased(
        self,
        session: Session,
        pick: _Pick,
        values: dict[str, Any],
        worker_id: str,
        expires: datetime,
        *,
        into: AuditBatch,
    ) -> list[Claim]:
        """Lease what ``pick`` finds to ``worker_id`` until ``expires``; the claims. The
        losses of the workers whose leases ran out are audited ``into`` the batch."""
        rows = session.execute(pick, values).all()
        if not rows:
            return []
        # a claimable grading whose lease names a holder: it ran out in that worker's
        # hands (a lease given back, or a deferral stored, names none); one whose lease
        # names none but keeps its expiry was taken from such a worker by a judge move,
        # which audited the loss
        held = [g for g, *_ in rows if g.lease_owner]
        moved = [g for g, *_ in rows if not g.lease_owner and g.lease_expires_at is not None]
        lost = workers_lost(session, held, worker_id, into, audited=moved)
        session.execute(
            update(GradingRecord)
            .where(col(GradingRecord.id).in_([g.id for g, *_ in rows]))
            .values(
                lease_owner=worker_id,
                lease_expires_at=expires,
                claim_count=GradingRecord.claim_count + 1,
            )
            .execution_options(synchronize_session=False)
        )
        jobs = {g.regrade_job_id for g, *_ in rows if g.regrade_job_id is not None}
        mark_jobs_started(self._db, session, jobs, worker_id)
        # the claim count as the UPDATE left it: one more than read under the lock
        return [
            claim_of(g, s, expires, truth, g.claim_count + 1, role, lost_workers=lost.get(g.id, 0))
            for g, s, truth, role in rows
        ]

    async def extend_lease(self, grading_id: str, worker_id: str, lease_seconds: float) -> bool:
        """Push the lease forward; False when ``worker_id`` no longer holds it."""
        expires = self._db.clock() + timedelta(seconds=lease_seconds)
        return await self._db.run(_extend_lease, grading_id, worker_id, expires)

    async def complete(
        self,
        grading_id: str,
        worker_id: str,
        result: GradingResult,
        *,
        provisional: bool = False,
        current: Mapping[str, Rubric] | None = None,
    ) -> bool:
        """Store a verdict (graded or unscored) with its answers and judge calls.

        ``provisional``: graded by a judge not qualified by a calibration run;
        ``current``: as :meth:`complete_many` takes it. Returns False and writes nothing
        when the grading is no longer pending or its lease is held by another worker
        (taken over after this one's expired).
        """
        item = FinishedGrading(grading_id, worker_id, result, provisional)
        return (await self.complete_many([item], current=current))[0]

    async def complete_many(
        self, items: Sequence[FinishedGrading], *, current: Mapping[str, Rubric] | None = None
    ) -> list[bool]:
        """Store several verdicts in one transaction (a group commit); each as ``complete``.

        A fixed number of statements for the whole batch (``storage.verdicts``):
        one lease check, one executemany per table, one INSERT of the audit rows, the
        regrade jobs' bookkeeping once. Whether each was stored, in order. Raises (and
        stores none) when one of them fails: the caller stores them one by one then.

        ``current``: the rubric files' current versions by id, which the overrides a
        regrade item carries off a grading whose rubric version is not stored (SREGym's
        imported verdicts) are read with, as that grading's page shows them; without
        it, such overrides are never carried (``override_outdated``).
        """
        if not items:
            return []
        return await self._db.run(self._complete, items, current or {})

    def _complete(
        self,
        session: Session,
        items: Sequence[FinishedGrading],
        current: Mapping[str, Rubric],
    ) -> list[bool]:
        jobs: dict[str, RegradeJobRecord] = {}

        def lock(gradings: Sequence[Mapping[str, Any]]) -> None:
            # the regrade items' rows before the verdicts' audit takes the chain's lock
            jobs.update(lock_items(self._db, session, gradings))

        written = write_verdicts(self._db, session, items, self._db.clock(), before_audit=lock)
        # a regrade item: carry overrides, promote, end the drained jobs
        worker = items[-1].worker_id
        items_completed(self._db, session, written.gradings, worker, jobs, current=current)
        return written.stored

    async def defer(
        self,
        grading_id: str,
        worker_id: str,
        *,
        reason: str,
        retry_at: datetime,
        calls: Sequence[JudgeCall] = (),
        claim_count: int,
    ) -> Deferral | None:
        """Keep a grading pending (e.g. the judge is unreachable) until ``retry_at``; what
        was done: ``"deferred"``, or ``"cancelled"`` for an item of a regrade job cancelled
        meanwhile (cancelled instead: nothing retries it). The failed calls are stored and
        audited; the lease is released. None, and nothing written, when ``worker_id`` does
        not hold the lease of a pending grading by its claim ``claim_count`` (required: an
        outcome is of one claim, and a process may hold a later claim of the same grading).
        """
        now = self._db.clock()
        args = (grading_id, worker_id, reason, retry_at, calls, now, claim_count)
        return await self._db.run(self._defer, *args)

    def _defer(
        self,
        session: Session,
        grading_id: str,
        worker_id: str,
        reason: str,
        retry_at: datetime,
        calls: Sequence[JudgeCall],
        now: datetime,
        claim_count: int,
    ) -> Deferral | None:
        grading = leased(self._db, session, grading_id, worker_id, claim_count)
        if grading is None:
            return None
        records = store_calls(session, grading, calls, now)
        grading.pending_reason = reason
        grading.not_before = retry_at
        grading.lease_owner = None
        grading.lease_expires_at = None
        grading.revision += 1
        session.flush()
        deferred = {
            "event": "grading.deferred",
            "entity_type": "grading",
            "entity_id": grading.id,
            "actor": worker_id,
            "payload": {
                "grading_id": grading.id,
                "reason": reason,
                "retry_at": iso_utc(retry_at),
                "claim_count": grading.claim_count,
                "judge_calls": [c["id"] for c in records],
                "revision": grading.revision,
            },
        }
        batch = AuditBatch()
        covered = call_records(records, first_event=0)
        for index, event in enumerate(call_events(grading.id, worker_id, records)):
            batch.add(event, rows=covered[index])
        batch.add(deferred, [grading.id])
        # its job's row before the audit chain's lock (see ``storage.database``)
        items = {grading.id: grading.regrade_job_id}
        cancelled = cancel_given_back(self._db, session, items, worker_id, into=batch)
        self._db.audit_many(session, batch.events, batch.covers, batch.rows)
        return "cancelled" if cancelled else "deferred"

    async def internal_errors(self, grading_id: str) -> int:
        """How many times the service has failed to grade ``grading_id`` (its deferrals
        for an ``internal_error``, counted in the audit log, which keeps every one)."""
        query = select(col(AuditRecord.payload)).where(
            col(AuditRecord.entity_id) == grading_id,
            col(AuditRecord.entity_type) == "grading",
            col(AuditRecord.event) == "grading.deferred",
        )
        payloads = await self._db.run_read(lambda s: s.scalars(query).all())
        return sum(str(p.get("reason", "")).startswith(INTERNAL_ERROR) for p in payloads)

    async def outcome_stored(self, grading_id: str, worker_id: str, *, claim_count: int) -> bool:
        """Whether ``worker_id``'s claim ``claim_count`` of ``grading_id`` stored its outcome,
        whatever became of the grading since: a deferral by that worker naming the claim,
        or a verdict by that worker with that claim the grading's last (as it stays once
        a verdict is stored). One query of the audit log, which keeps every outcome."""
        query = (
            select(col(AuditRecord.event), col(AuditRecord.payload), col(GradingRecord.claim_count))
            .join(GradingRecord, col(GradingRecord.id) == col(AuditRecord.entity_id))
            .where(
                col(AuditRecord.entity_id) == grading_id,
                col(AuditRecord.entity_type) == "grading",
                col(AuditRecord.actor) == worker_id,
                col(AuditRecord.event).in_(_OUTCOMES),
            )
        )
        rows = await self._db.run_read(lambda s: s.execute(query).all())
        return any(
            payload.get("claim_count") == claim_count
            if event == "grading.deferred"
            else last == claim_count
            for event, payload, last in rows
        )

    async def release_lease(self, grading_id: str, worker_id: str) -> bool:
        """Give a claimed grading back at once (e.g. on shutdown) so another worker takes it.

        Clears ``lease_owner`` and ``lease_expires_at`` only if ``worker_id`` holds the
        lease of a still-pending grading; writes nothing else (no revision, no audit
        event: leases are bookkeeping), except that an item of a regrade job cancelled
        meanwhile is cancelled (audited). Returns whether a lease was released.
        """
        return bool(await self.release_leases([grading_id], worker_id))

    async def release_leases(self, grading_ids: Sequence[str], worker_id: str) -> int:
        """:meth:`release_lease` for several gradings in one statement; how many."""
        if not grading_ids:
            return 0
        where = col(GradingRecord.id).in_(list(grading_ids))
        return len(await self._db.run(self._release, worker_id, where))

    async def release_held(self, worker_id: str, *, keep: Collection[str] = ()) -> list[str]:
        """Give back every pending grading ``worker_id`` holds but those in ``keep`` (being
        stored): its process stops, whatever it was doing. A claim whose transaction was
        under way when its caller was cancelled commits all the same (``Database.run``
        waits for it) and is given back too. Otherwise as :meth:`release_lease`; the ids
        of the gradings released."""
        where = col(GradingRecord.id).not_in(list(keep)) if keep else true()
        return await self._db.run(self._release, worker_id, where)

    def _release(self, session: Session, worker_id: str, where: ColumnElement[bool]) -> list[str]:
        """Clear the leases ``worker_id`` holds on the pending gradings ``where`` selects;
        cancel those of cancelled regrade jobs. The ids released."""
        released = session.execute(
            update(GradingRecord)
            .where(
                where,
                col(GradingRecord.status) == "pending",
                col(GradingRecord.lease_owner) == worker_id,
            )
            .values(lease_owner=None, lease_expires_at=None)
            .returning(col(GradingRecord.id), col(GradingRecord.regrade_job_id))
            .execution_options(synchronize_session=False)
        ).all()
        items = {grading_id: job_id for grading_id, job_id in released}
        cancel_given_back(self._db, session, items, worker_id)
        return list(items)

    async def depth(self) -> tuple[int, datetime | None]:
        """Pending gradings (leased or not) and when the oldest of them was created."""
        query = select(func.count(), func.min(GradingRecord.created_at)).where(
            col(GradingRecord.status) == "pending"
        )
        count, oldest = await self._db.run_read(lambda s: s.execute(query).one())
        return int(count), oldest


def _finds_work(session: Session, probe: Select[bool], values: dict[str, Any]) -> bool:
    """Whether a claim's ``probe`` finds anything to lease or to sweep."""
    return bool(session.execute(probe, values).scalar_one())


def _extend_lease(session: Session, grading_id: str, worker_id: str, expires: datetime) -> bool:
    """Move the lease ``worker_id`` holds on a pending grading to ``expires``; whether it
    held one."""
    result = session.connection().execute(
        update(GradingRecord)
        .where(
            col(GradingRecord.id) == grading_id,
            col(GradingRecord.status) == "pending",
            col(GradingRecord.lease_owner) == worker_id,
        )
        .values(lease_expires_at=expires)
    )
    return bool(result.rowcount)
