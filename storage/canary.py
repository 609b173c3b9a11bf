"""Drift canary runs: a judge's agreement on a labelled canary set, run after run.

Each run keeps the judge's identity (as calibration runs name it, and the model digest
measured), the canary set's name and sha256, what it cost in judge calls within its
budget, the agreement figures, the judge's answers item by item (the next runs compare
theirs with the first run after the judge's latest calibration run) and whether it
demoted the judge. A demotion is audited as ``judge.demoted`` (a webhook event) in the
run's transaction; a judge with a demoting run after its latest calibration run is
provisional (``storage.calibration``) until a new calibration run re-qualifies it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Index, String, select
from sqlalchemy.orm import Session
from sqlmodel import Field, SQLModel, col

from storage.database import Database
from storage.tables import _created, empty_dict, empty_list, new_id

__all__ = ["CanaryRepository", "CanaryRunRecord", "demoted_since"]


class CanaryRunRecord(SQLModel, table=True):
    """One run of the drift canary for one judge."""

    __tablename__ = "canary_run"
    __table_args__ = (Index("ix_canary_run_judge_spec_created_at", "judge_spec", "created_at"),)

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    #: the judge's name without its address, as calibration runs name it
    judge_spec: str = Field(sa_type=String(512))
    judge_digest: str | None = Field(default=None, sa_type=String(256))
    rubric_version: str = Field(sa_type=String(64))
    asking_mode: str = Field(default="single", sa_type=String(16))
    set_name: str = Field(sa_type=String(256))
    set_sha256: str = Field(sa_type=String(64))
    #: the calibration run compared with (None: the judge was never calibrated)
    calibration_run_id: str | None = Field(default=None, sa_type=String(32))
    n: int = 0
    scored: int = 0
    judge_calls: int = 0
    budget: int = 0
    verdict_accuracy: float | None = Field(default=None, sa_type=Float)
    verdict_kappa: float | None = Field(default=None, sa_type=Float)
    #: share of the answers that differ from the baseline run's (None: no baseline)
    changed_share: float | None = Field(default=None, sa_type=Float)
    demoted: bool = False
    #: why it demoted the judge, in words
    reasons: list[str] = Field(default_factory=empty_list, sa_type=JSON, nullable=False)
    #: agreement rows (``judge.agreement``) as JSON
    figures: dict[str, Any] = Field(default_factory=empty_dict, sa_type=JSON, nullable=False)
    #: item key -> question id (and ``verdict``) -> the judge's answer
    answers: dict[str, Any] = Field(default_factory=empty_dict, sa_type=JSON, nullable=False)
    created_by: str = Field(default="canary", sa_type=String(64))
    created_at: datetime = _created()


_R = CanaryRunRecord


def demoted_since(session: Session, judge_spec: str, since: datetime) -> bool:
    """Whether a canary run after ``since`` demoted the judge named ``judge_spec``."""
    query = select(col(_R.id)).where(
        col(_R.judge_spec) == judge_spec, col(_R.created_at) > since, col(_R.demoted).is_(True)
    )
    return session.execute(query.limit(1)).first() is not None


class CanaryRepository:
    """Canary runs, their baseline and demotions."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def add_run(self, run: CanaryRunRecord) -> CanaryRunRecord:
        """Store a run; a demoting one is audited as ``judge.demoted``."""

        def work(session: Session) -> CanaryRunRecord:
            run.created_at = self._db.clock()
            session.add(run)
            session.flush()
            self._db.audit(
                session,
                "judge.demoted" if run.demoted else "canary.completed",
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
            return run

        return await self._db.run(work)

    async def baseline(
        self, judge_spec: str, set_sha256: str, *, since: datetime | None
    ) -> CanaryRunRecord | None:
        """The first run of this judge on this set after ``since`` (its latest
        calibration run), whose answers later runs are compared with."""
        query = select(_R).where(col(_R.judge_spec) == judge_spec, col(_R.set_sha256) == set_sha256)
        if since is not None:
            query = query.where(col(_R.created_at) > since)
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

    async def demoted_since(self, judge_spec: str, since: datetime) -> bool:
        """Whether a run after ``since`` demoted the judge."""
        return await self._db.run_read(demoted_since, judge_spec, since)
