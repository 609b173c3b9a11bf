"""Calibration runs: storing them, the previous run of a gold set, and qualification.

A judge is identified by its spec without the base URL (``backend:model``), its sampling
settings, the rubric version and the asking mode; it is qualified when the latest
calibration run of that identity reached the bar and measured the model now behind the
name: a run records the model digest it measured (``judge.identity``), and once another
digest is seen behind the name the qualification is provisional until a new run
measures it (:func:`holds`). Where either digest is unknown the run alone decides. A
drift canary run that demoted the judge after its latest calibration run makes it
provisional too, until a new calibration run (:func:`demoted`; the canary's
runs are the judges feature's).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.database import Database
from storage.quality_tables import CalibrationRunRecord, CanaryRunRecord

__all__ = ["CalibrationRepository", "demoted", "holds"]

_C = CalibrationRunRecord
_K = CanaryRunRecord


def demoted(session: Session, calibration_run_id: str) -> bool:
    """Whether a canary run compared with this calibration run demoted its judge: the
    identity that run measured (spec, sampling settings, rubric version, asking), not
    the same model asked otherwise; a new calibration run starts afresh."""
    query = select(col(_K.id)).where(
        col(_K.calibration_run_id) == calibration_run_id, col(_K.demoted).is_(True)
    )
    return session.execute(query.limit(1)).first() is not None


def holds(run: CalibrationRunRecord | None, current_digest: str | None) -> bool:
    """Whether ``run`` (a judge's latest) qualifies it now: the run qualified, and the
    digest it measured is the one behind the name now, where both are known."""
    if run is None or not run.qualified:
        return False
    return run.judge_digest is None or current_digest is None or run.judge_digest == current_digest


class CalibrationRepository:
    """Calibration runs and the qualification of judges."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def add_run(self, run: CalibrationRunRecord) -> CalibrationRunRecord:
        """Store a run and audit it."""

        def work(session: Session) -> CalibrationRunRecord:
            run.created_at = self._db.clock()
            session.add(run)
            session.flush()
            self._db.audit(
                session,
                "calibration.completed",
                entity_type="calibration_run",
                entity_id=run.id,
                actor=run.created_by,
                payload={
                    "judge": run.judge_spec,
                    "rubric_version": run.rubric_version,
                    "gold_sha256": run.gold_sha256,
                    "n": run.n,
                    "verdict_kappa": run.verdict_kappa,
                    "false_pass_rate": run.false_pass_rate,
                    "qualified": run.qualified,
                    "judge_digest": run.judge_digest,
                },
            )
            return run

        return await self._db.run(work)

    async def runs(
        self,
        *,
        judge_spec: str,
        judge_settings: dict[str, Any],
        rubric_version: str,
        asking_mode: str,
        gold_sha256: str | None = None,
    ) -> list[CalibrationRunRecord]:
        """Runs of one judge identity, newest first (optionally of one gold set)."""
        query = select(_C).where(
            col(_C.judge_spec) == judge_spec,
            col(_C.rubric_version) == rubric_version,
            col(_C.asking_mode) == asking_mode,
        )
        if gold_sha256 is not None:
            query = query.where(col(_C.gold_sha256) == gold_sha256)
        ordered = query.order_by(col(_C.created_at).desc())
        runs = await self._db.run_read(lambda session: list(session.execute(ordered).scalars()))
        return [r for r in runs if r.judge_settings == judge_settings]

    async def recent(self, *, limit: int = 200) -> list[CalibrationRunRecord]:
        """The newest runs of every judge, newest first."""
        query = select(_C).order_by(col(_C.created_at).desc(), col(_C.id).desc()).limit(limit)

        def work(session: Session) -> list[CalibrationRunRecord]:
            return list(session.execute(query).scalars())

        return await self._db.run_read(work)

    async def is_qualified(
        self,
        *,
        judge_spec: str,
        judge_settings: dict[str, Any],
        rubric_version: str,
        asking_mode: str,
        current_digest: str | None = None,
    ) -> bool:
        """Whether the latest calibration run of this judge identity qualifies it, with
        the model digest now behind its name (:func:`holds`)."""
        runs = await self.runs(
            judge_spec=judge_spec,
            judge_settings=judge_settings,
            rubric_version=rubric_version,
            asking_mode=asking_mode,
        )
        if not holds(runs[0] if runs else None, current_digest):
            return False
        latest = runs[0]
        return not await self._db.run_read(demoted, latest.id)
