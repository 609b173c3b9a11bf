"""Reads of judge votes: every panel member's and sample's answer per question."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session
from sqlmodel import col

from storage.database import Database
from storage.gradings import records_by_grading
from storage.quality_tables import JudgeVoteRecord

__all__ = ["VoteReads"]


class VoteReads:
    """The votes stored with gradings (the queue's ``complete`` writes them)."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def for_gradings(self, grading_ids: Sequence[str]) -> dict[str, list[JudgeVoteRecord]]:
        """Votes of several gradings at once, by judge, sample and question."""
        return await self._db.run_read(self.read_for_gradings, grading_ids)

    @staticmethod
    def read_for_gradings(
        session: Session, grading_ids: Sequence[str]
    ) -> dict[str, list[JudgeVoteRecord]]:
        """``for_gradings`` in the caller's ``session``."""
        order = (col(JudgeVoteRecord.id),)
        return records_by_grading(session, JudgeVoteRecord, grading_ids, order=order)
