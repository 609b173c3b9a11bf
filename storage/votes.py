"""Reads of judge votes: every panel member's and sample's answer per question."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from storage.database import Database
from storage.quality_tables import JudgeVoteRecord

__all__ = ["VoteReads"]


class VoteReads:
    """The votes stored with gradings (the queue's ``complete`` writes them)."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def for_gradings(
        self, grading_ids: Sequence[str], *, tx: AsyncSession | None = None
    ) -> dict[str, list[JudgeVoteRecord]]:
        """Votes of several gradings at once, by judge, sample and question."""
        found: dict[str, list[JudgeVoteRecord]] = {gid: [] for gid in grading_ids}
        if not grading_ids:
            return found
        query = (
            select(JudgeVoteRecord)
            .where(col(JudgeVoteRecord.grading_id).in_(list(grading_ids)))
            .order_by(col(JudgeVoteRecord.id))
        )
        async with self._db.reading(tx) as session:
            for record in (await session.execute(query)).scalars():
                found[record.grading_id].append(record)
        return found
