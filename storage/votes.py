"""Reads of judge votes: every panel member's and sample's answer per question."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlmodel import col

from storage.base import StoreBase
from storage.quality_tables import JudgeVoteRecord

__all__ = ["VoteReads"]


class VoteReads(StoreBase):
    """The votes stored with gradings (``complete_grading`` writes them)."""

    async def votes_for(self, grading_ids: Sequence[str]) -> dict[str, list[JudgeVoteRecord]]:
        """Votes of several gradings at once, by judge, sample and question."""
        found: dict[str, list[JudgeVoteRecord]] = {gid: [] for gid in grading_ids}
        if not grading_ids:
            return found
        query = (
            select(JudgeVoteRecord)
            .where(col(JudgeVoteRecord.grading_id).in_(list(grading_ids)))
            .order_by(col(JudgeVoteRecord.id))
        )
        async with self._read() as session:
            for record in (await session.execute(query)).scalars():
                found[record.grading_id].append(record)
        return found
