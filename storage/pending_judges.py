"""Pending gradings by the judge they wait for, and moving them to another judge.

A live grading (of a submission or an imported row, not an item of a regrade job)
records the judge that was configured when it was accepted. When the configured judge
changes, the pending ones move to the new judge (``api.grading.judge_moves`` decides
when), or an admin moves them. Each move is one ``grading.judge_moved`` event per
grading in the audit log, with the judge it had (``from``) and the one it has now
(``to``), credentials in their base URLs masked, covering the grading's new state.
Items of regrade jobs keep the judge their job names and never move.

A moved grading is claimable at once (its wait for the old judge is over) and its
revision is bumped (what it says changed: its judge). A move takes a grading from the
worker whose lease it names, whose result is then never stored. A worker whose lease
ran out was lost while grading it (killed, or cut off from the database): the move
audits that loss as a claim would (``storage.lost_workers``) and keeps the
lease's expiry, so that the next claim counts it among the workers the grading lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.masking import mask_passwords
from storage.audit import grading_digests
from storage.bytewise import bytewise
from storage.database import AuditBatch, Database
from storage.lost_workers import workers_lost
from storage.tables import GradingRecord
from storage.verdicts import leased

__all__ = ["JUDGE_MOVED", "PendingJudge", "PendingJudgeRepository", "RecordedJudge"]

#: the audit event of one grading moved to another judge
JUDGE_MOVED = "grading.judge_moved"
#: ``(spec, backend, model)`` as a grading records its judge
RecordedJudge = tuple[str, str, str]
#: gradings moved per transaction
_BATCH = 500


@dataclass(frozen=True)
class PendingJudge:
    """How many pending gradings are bound to one judge spec."""

    judge_spec: str
    #: gradings of submissions and imports (False: items of regrade jobs)
    live: bool
    count: int


class PendingJudgeRepository:
    """Counting pending gradings by judge; moving live ones to another judge, audited."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def by_judge(self) -> list[PendingJudge]:
        """Pending gradings (leased or not) by judge spec, live ones apart from regrade items."""
        live = col(GradingRecord.regrade_job_id).is_(None)
        spec = col(GradingRecord.judge_spec)
        query = (
            select(spec, live, func.count())
            .where(col(GradingRecord.status) == "pending")
            .group_by(spec, live)
            .order_by(bytewise(spec))
        )
        rows = await self._db.run_read(lambda session: session.execute(query).all())
        return [
            PendingJudge(judge_spec=s, live=bool(is_live), count=int(n)) for s, is_live, n in rows
        ]

    async def move(
        self,
        to: RecordedJudge,
        *,
        actor: str,
        reason: str,
        from_spec: str | None = None,
        take_leased: bool = False,
    ) -> list[str]:
        """Move live pending gradings to the judge ``to``; the ids moved, oldest first.

        ``from_spec``: only gradings bound to that spec (as recorded); None: every
        judge but ``to``. Gradings leased to a worker are left alone unless
        ``take_leased``, which takes the lease away (the worker's result is then
        discarded, never stored). Transactions of up to 500 gradings each.
        """
        moved: list[str] = []

        def move_batch(session: Session) -> list[GradingRecord]:
            batch = self._pick(session, to[0], from_spec, take_leased)
            self._write(session, batch, to, actor=actor, reason=reason)
            return batch

        while True:
            batch = await self._db.run(move_batch)
            moved += [g.id for g in batch]
            if len(batch) < _BATCH:
                return moved

    async def move_claimed(
        self, grading_id: str, worker_id: str, to: RecordedJudge, *, reason: str, claim_count: int
    ) -> bool:
        """Move one grading leased to ``worker_id`` by its claim ``claim_count`` to ``to``,
        keeping the lease.

        False, and nothing written, when ``worker_id`` no longer holds that claim's lease
        of a pending grading.
        """

        def move_one(session: Session) -> bool:
            grading = leased(self._db, session, grading_id, worker_id, claim_count)
            if grading is None:
                return False
            self._write(session, [grading], to, actor=worker_id, reason=reason, keep_lease=True)
            return True

        return await self._db.run(move_one)

    def _pick(
        self, session: Session, to_spec: str, from_spec: str | None, take_leased: bool
    ) -> list[GradingRecord]:
        spec = col(GradingRecord.judge_spec)
        where: list[Any] = [
            col(GradingRecord.status) == "pending",
            col(GradingRecord.regrade_job_id).is_(None),
            spec == from_spec if from_spec is not None else spec != to_spec,
        ]
        if not take_leased:
            expires = col(GradingRecord.lease_expires_at)
            where.append(or_(expires.is_(None), expires < self._db.clock()))
        query = (
            select(GradingRecord)
            .where(*where)
            .order_by(col(GradingRecord.created_at), col(GradingRecord.id))
            .limit(_BATCH)
        )
        if self._db.postgres:  # a grading being completed now is not waited for
            query = query.with_for_update(skip_locked=True)
        return list(session.execute(query).scalars())

    def _write(
        self,
        session: Session,
        gradings: Sequence[GradingRecord],
        to: RecordedJudge,
        *,
        actor: str,
        reason: str,
        keep_lease: bool = False,
    ) -> None:
        """Bind each grading to ``to`` and append its ``grading.judge_moved`` event.

        Unless ``keep_lease`` (the claiming worker moves it), a lease is taken away: a
        live one cleared, one that ran out with its worker audited as that worker's
        loss, its expiry kept for the next claim to count (``storage.queue``).
        """
        if not gradings:
            return
        audited = AuditBatch()
        now = self._db.clock()
        if not keep_lease:
            ran_out = [g for g in gradings if g.lease_owner and not _live(g, now)]
            workers_lost(session, ran_out, actor, audited)
        events = []
        for grading in gradings:
            events.append(
                {
                    "event": JUDGE_MOVED,
                    "entity_type": "grading",
                    "entity_id": grading.id,
                    "actor": actor,
                    "payload": {
                        "grading_id": grading.id,
                        "from": mask_passwords(grading.judge_spec),
                        "to": mask_passwords(to[0]),
                        "reason": reason,
                        "revision": grading.revision + 1,
                    },
                }
            )
            grading.judge_spec, grading.judge_backend, grading.judge_model = to
            grading.pending_reason = None
            grading.not_before = None
            if not keep_lease:
                if _live(grading, now):
                    grading.lease_expires_at = None
                grading.lease_owner = None
            grading.revision += 1
        session.flush()
        # each event covers its grading's new state; the digests read in one go
        digests = grading_digests(session, [g.id for g in gradings])
        for event, grading in zip(events, gradings, strict=True):
            audited.add(event, {grading.id: str(digests[grading.id])})
        self._db.audit_many(session, audited.events, audited.covers, audited.rows)


def _live(grading: GradingRecord, now: datetime) -> bool:
    """Whether ``grading``'s lease holds at ``now`` (one that ran out is claimable)."""
    return grading.lease_expires_at is not None and grading.lease_expires_at >= now
