"""Rubric versions and scenarios: what gradings refer to (scenarios in ``storage.scenarios``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.rubric import Rubric, rubric_from_mapping
from storage.database import Database
from storage.scenarios import ScenarioRepository, ScenarioSpec
from storage.tables import RubricVersionRecord, ScenarioRecord

__all__ = ["CatalogRepository", "rubric_key"]


def rubric_key(rubric_id: str, version: str) -> str:
    """The primary key of a rubric version: ``f"{rubric_id}@{version}"``."""
    return f"{rubric_id}@{version}"


class CatalogRepository:
    """Rubric versions (kept whole) and scenarios (with their ground truth)."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        #: rubric versions seen committed in this database (they never change)
        self._known_rubrics: set[str] = set()
        #: scenarios and the versions of their ground truths
        self.scenarios = ScenarioRepository(db)

    async def save_rubric(self, rubric: Rubric, *, actor: str = "system") -> None:
        """Keep this rubric version; saving a known version again does nothing."""
        await self._db.run(lambda session: self.ensure_rubric(session, rubric, actor=actor))

    def ensure_rubric(self, session: Session, rubric: Rubric, *, actor: str) -> bool:
        """Insert the version if missing (audited) in the caller's transaction; True when new."""
        key = rubric_key(rubric.id, rubric.version)
        if key in self._known_rubrics:  # versions are never changed nor deleted
            return False
        if session.get(RubricVersionRecord, key) is not None:
            self._known_rubrics.add(key)
            return False
        values: dict[str, Any] = {
            "key": key,
            "rubric_id": rubric.id,
            "version": rubric.version,
            "label": rubric.label,
            "content_hash": rubric.content_hash,
            "content": rubric.model_dump(mode="json"),
            "created_at": self._db.clock(),
        }
        table = RubricVersionRecord.__table__  # type: ignore[attr-defined]
        inserted = self._db.insert_ignore(session, table, values)
        if inserted:
            payload = {"rubric_id": rubric.id, "version": rubric.version, "label": rubric.label}
            self._db.audit(
                session,
                "rubric.saved",
                entity_type="rubric",
                entity_id=key,
                actor=actor,
                payload={**payload, "content_hash": rubric.content_hash},
            )
        return inserted

    async def get_rubric(self, rubric_id: str, version: str | None = None) -> Rubric | None:
        """A saved rubric version; ``version=None`` gives the one saved last."""
        return await self._db.run_read(self.read_rubric, rubric_id, version)

    @staticmethod
    def read_rubric(session: Session, rubric_id: str, version: str | None = None) -> Rubric | None:
        """``get_rubric`` in the caller's ``session``."""
        query = select(RubricVersionRecord).where(col(RubricVersionRecord.rubric_id) == rubric_id)
        if version is not None:
            query = query.where(col(RubricVersionRecord.version) == version)
        query = query.order_by(
            col(RubricVersionRecord.created_at).desc(), col(RubricVersionRecord.key).desc()
        ).limit(1)
        record = session.execute(query).scalar_one_or_none()
        if record is None:
            return None
        return rubric_from_mapping(record.content, source=f"stored rubric {record.key}")

    async def list_rubric_versions(
        self, rubric_id: str | None = None
    ) -> Sequence[RubricVersionRecord]:
        """Saved rubric versions, oldest first, optionally of one rubric."""
        query = select(RubricVersionRecord).order_by(
            col(RubricVersionRecord.created_at), col(RubricVersionRecord.key)
        )
        if rubric_id is not None:
            query = query.where(col(RubricVersionRecord.rubric_id) == rubric_id)
        return await self._db.run_read(lambda session: session.execute(query).scalars().all())

    async def create_scenario(
        self,
        *,
        id: str,
        ground_truth: str,
        title: str = "",
        tags: Sequence[str] = (),
        scenario_set: str | None = None,
        actor: str,
    ) -> ScenarioRecord:
        """Register a scenario as version 1; raises Conflict when the id is taken."""
        spec = ScenarioSpec(id, ground_truth, title, tuple(tags), scenario_set)
        return await self.scenarios.create(spec, actor=actor)

    async def get_scenario(self, scenario_id: str) -> ScenarioRecord | None:
        """A scenario by id, or None."""
        return await self.scenarios.get(scenario_id)
