"""Drift canary runs: the schedule's claims, storing a run, its baseline, the newest
runs, demotions.

Each run keeps the judge's identity (as calibration runs name it, and the model digest
measured), the canary set's name and sha256, what it cost in judge calls within its
budget, the agreement figures, the judge's answers item by item (the next runs compare
theirs with the first run after the judge's latest calibration run) and whether it
demoted the judge. A demotion is audited as ``judge.demoted`` (a webhook event) in the
run's transaction; a judge with a demoting run after its latest calibration run is
provisional (``storage.calibration.demoted``, read by qualification) until a new
calibration run re-qualifies it.

The schedule is one for every process that runs it: a scheduled run is claimed first
(:meth:`CanaryQueries.claim`), audited as ``canary.scheduled``, in a transaction that
holds the judge's canary lock, so that of processes claiming together one runs it and
the others find it taken. The process renews its claim while the run goes on
(:meth:`CanaryQueries.renew`, audited as ``canary.renewed``), so that a run slower than a
claim's life keeps it; a claim that is not renewed (its process stopped or stalled)
lapses, and a renewal that finds another process's claim since tells the run to stop.
Storing a run holds the same lock, so that two runs finding one drift together demote
the judge once.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.calibration import demoted
from storage.database import Database, hold_named_lock
from storage.quality_tables import CanaryRunRecord
from storage.tables import AuditRecord

__all__ = ["RENEWED", "SCHEDULED", "CanaryQueries"]

_R = CanaryRunRecord
_A = AuditRecord
#: the audit event of a scheduled canary run claimed by a process
SCHEDULED = "canary.scheduled"
#: the audit event of a claim renewed by its process while the run goes on
RENEWED = "canary.renewed"


def _latest_claim(session: Session, judge_spec: str) -> tuple[datetime, str | None] | None:
    """When the judge's newest claim event (a claim or a renewal) was made, and the claim
    it names (None for a claim stored before claims were named); None: never claimed."""
    query = select(col(_A.created_at), col(_A.payload)).where(
        col(_A.entity_id) == judge_spec,
        col(_A.entity_type) == "judge",
        col(_A.event).in_((SCHEDULED, RENEWED)),
    )
    row = session.execute(query.order_by(col(_A.seq).desc()).limit(1)).first()
    if row is None:
        return None
    at, payload = row
    return at, (payload or {}).get("claim")


def _lock_judge(session: Session, judge_spec: str) -> None:
    """Hold the canary lock of ``judge_spec`` until the transaction ends (a judge has no
    row of its own to lock)."""
    hold_named_lock(session, "canary", judge_spec)


class CanaryQueries:
    """Canary runs, their baseline and demotions."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    def _audit_claim(
        self, session: Session, event: str, judge_spec: str, claim: str, actor: str
    ) -> None:
        """Audit ``event`` (a claim or its renewal) of the claim ``claim`` of ``judge_spec``."""
        self._db.audit(
            session,
            event,
            entity_type="judge",
            entity_id=judge_spec,
            actor=actor,
            payload={"judge": judge_spec, "claim": claim},
        )

    async def claim(
        self, judge_spec: str, *, within: float, hold: float, actor: str = "canary"
    ) -> str | None:
        """Claim the scheduled canary run of ``judge_spec`` (named as calibration runs
        name it): the claim's id, audited as ``canary.scheduled``, unless a run of the
        judge was stored within the last ``within`` seconds or a claim is under way (its
        newest claim event, the claim or a renewal, made within the last ``hold`` seconds
        and no run stored since: a claim whose process stops renewing it, stopped or
        stalled, lapses then); else None. One transaction under the judge's canary lock:
        of processes claiming together, one gets it."""

        def work(session: Session) -> str | None:
            _lock_judge(session, judge_spec)
            now = self._db.clock()
            stored = select(col(_R.created_at)).where(col(_R.judge_spec) == judge_spec)
            last_run = session.execute(
                stored.order_by(col(_R.created_at).desc()).limit(1)
            ).scalar_one_or_none()
            if last_run is not None and last_run >= now - timedelta(seconds=within):
                return None
            latest = _latest_claim(session, judge_spec)
            # a claim with no run stored since is a run under way while it is renewed
            if (
                latest is not None
                and (last_run is None or latest[0] > last_run)
                and latest[0] >= now - timedelta(seconds=hold)
            ):
                return None
            claim = uuid.uuid4().hex
            self._audit_claim(session, SCHEDULED, judge_spec, claim, actor)
            return claim

        return await self._db.run(work)

    async def renew(self, judge_spec: str, claim: str, *, actor: str = "canary") -> bool:
        """Renew the claim ``claim`` (from :meth:`claim`) of ``judge_spec``'s scheduled
        run while the run goes on: True, audited as ``canary.renewed`` (its life starts
        anew), while it is the judge's newest claim; False when another process claimed
        the run since (the claim had lapsed): the run must stop. A claim that lapsed but
        that no process took is renewed (under the lock, no claim can come between)."""

        def work(session: Session) -> bool:
            _lock_judge(session, judge_spec)
            latest = _latest_claim(session, judge_spec)
            if latest is None or latest[1] != claim:
                return False
            self._audit_claim(session, RENEWED, judge_spec, claim, actor)
            return True

        return await self._db.run(work)

    async def add_run(self, run: CanaryRunRecord) -> bool:
        """Store a run; the first demoting run compared with the judge's calibration run
        (``run.calibration_run_id``) is audited as ``judge.demoted`` (and answers True),
        every other run as ``canary.completed``: a judge demoted already is not demoted
        again, so a drift that lasts is one event, not one per run (the judge's canary
        lock held: a run stored meanwhile by another process is seen)."""

        def work(session: Session) -> bool:
            _lock_judge(session, run.judge_spec)
            already = (
                run.demoted
                and run.calibration_run_id is not None
                and demoted(session, run.calibration_run_id)
            )
            newly = run.demoted and not already
            run.created_at = self._db.clock()
            session.add(run)
            session.flush()
            self._db.audit(
                session,
                "judge.demoted" if newly else "canary.completed",
                entity_type="judge",
                entity_id=run.judge_spec,
                actor=run.created_by,
                payload={
                    "judge": run.judge_spec,
                    "judge_digest": run.judge_digest,
                    "canary_run_id": run.id,
                    "calibration_run_id": run.calibration_run_id,
                    "n": run.n,
                    "judge_calls": run.judge_calls,
                    "verdict_accuracy": run.verdict_accuracy,
                    "changed_share": run.changed_share,
                    "demoted": run.demoted,
                    "reasons": list(run.reasons),
                },
            )
            return newly

        return await self._db.run(work)

    async def baseline(
        self, judge_spec: str, set_sha256: str, *, calibration_run_id: str | None
    ) -> CanaryRunRecord | None:
        """The first run of this judge on this set compared with its calibration run
        ``calibration_run_id`` (None: never calibrated) that scored any item, whose answers
        later runs are compared with (a run the judge could not answer at all, a model
        still loading, has none: as the baseline it would end the answers check)."""
        run_id = col(_R.calibration_run_id)
        compared = run_id.is_(None) if calibration_run_id is None else run_id == calibration_run_id
        query = select(_R).where(
            col(_R.judge_spec) == judge_spec,
            col(_R.set_sha256) == set_sha256,
            compared,
            col(_R.scored) > 0,
        )
        first = query.order_by(col(_R.created_at), col(_R.id)).limit(1)
        return await self._db.run_read(lambda s: s.execute(first).scalars().first())

    async def runs(
        self, *, judge_spec: str | None = None, limit: int = 100
    ) -> list[CanaryRunRecord]:
        """The newest runs (of one judge), newest first."""
        query = select(_R)
        if judge_spec is not None:
            query = query.where(col(_R.judge_spec) == judge_spec)
        ordered = query.order_by(col(_R.created_at).desc(), col(_R.id).desc()).limit(limit)
        return await self._db.run_read(lambda s: list(s.execute(ordered).scalars()))

    async def demoted(self, calibration_run_id: str) -> bool:
        """Whether a canary run compared with this calibration run demoted its judge."""
        return await self._db.run_read(demoted, calibration_run_id)
