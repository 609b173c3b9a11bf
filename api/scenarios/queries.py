"""Reading scenarios: a filtered page of them, and the versions of one.

Pages are ordered by id, character by character (``storage.bytewise``: ``A`` before
``a``, on every database), and paginated by keyset: the cursor holds the last id, signed
(``storage.cursors``), and the next page continues strictly after it, so scenarios
added between pages never shift or duplicate rows of later pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.bytewise import bytewise, bytewise_starts_with
from storage.cursors import CursorCodec, continues
from storage.database import Database
from storage.errors import InvalidCursor, NotFound
from storage.scenario_tables import ScenarioVersionRecord
from storage.tables import ScenarioRecord

__all__ = ["ScenarioFilter", "ScenarioQueries"]

MAX_PAGE = 500


@dataclass(frozen=True)
class ScenarioFilter:
    """Filters of :meth:`ScenarioQueries.page`; None means "any".

    ``created_after`` is inclusive and ``created_before`` exclusive, on the time the
    scenario was registered; ``id_prefix`` matches ids starting with it, literally.
    """

    scenario_set: str | None = None
    id_prefix: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


class ScenarioQueries:
    """Read-only views of scenarios and their versions."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        self._cursors = CursorCodec(db.key, "scenarios")

    def _after(self, cursor: str) -> str:
        position = self._cursors.decode(cursor)
        if len(position) != 1 or not isinstance(position[0], str) or len(position[0]) > 128:
            raise InvalidCursor("the cursor is not one this service issued")
        return position[0]

    async def page(
        self, filters: ScenarioFilter, *, after: str | None = None, limit: int = 50
    ) -> tuple[list[ScenarioRecord], str | None]:
        """A page of scenarios in id order, and the cursor of the next page (or None)."""
        limit = max(1, min(limit, MAX_PAGE))
        s = ScenarioRecord
        query = select(s)
        if filters.scenario_set is not None:
            query = query.where(col(s.scenario_set) == filters.scenario_set)
        if filters.id_prefix:
            query = query.where(bytewise_starts_with(col(s.id), filters.id_prefix))
        if filters.created_after is not None:
            query = query.where(col(s.created_at) >= filters.created_after)
        if filters.created_before is not None:
            query = query.where(col(s.created_at) < filters.created_before)
        if continues(after):
            query = query.where(bytewise(col(s.id)) > self._after(after))
        query = query.order_by(bytewise(col(s.id))).limit(limit + 1)
        rows = await self._db.run_read(lambda session: list(session.execute(query).scalars()))
        more = len(rows) > limit
        rows = rows[:limit]
        cursor = self._cursors.encode([rows[-1].id]) if more and rows else None
        return rows, cursor

    async def versions(self, scenario_id: str) -> list[ScenarioVersionRecord]:
        """Every version of a scenario's ground truth, oldest first; NotFound when unknown."""
        query = (
            select(ScenarioVersionRecord)
            .where(col(ScenarioVersionRecord.scenario_id) == scenario_id)
            .order_by(col(ScenarioVersionRecord.version))
        )

        def read(session: Session) -> list[ScenarioVersionRecord]:
            if session.get(ScenarioRecord, scenario_id) is None:
                raise NotFound(f"no scenario with id {scenario_id!r}")
            return list(session.execute(query).scalars())

        return await self._db.run_read(read)

    async def version(self, scenario_id: str, version: int) -> ScenarioVersionRecord:
        """One version of a scenario's ground truth; NotFound for an unknown one."""
        key = (scenario_id, version)
        record = await self._db.run_read(lambda session: session.get(ScenarioVersionRecord, key))
        if record is None:
            raise NotFound(f"scenario {scenario_id!r} has no version {version}")
        return record
