"""Blind human labels: a human's own answers to a grading's questions, once per human."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.database import AuditBatch, Database
from storage.errors import Conflict, InvalidReview, NotFound
from storage.review_tables import HumanLabelRecord
from storage.tables import GradingRecord

__all__ = ["LabelQueries"]


class LabelQueries:
    """Storing and reading blind labels (labels from overrides are written with the
    override)."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def add(
        self,
        grading_id: str,
        *,
        question_ids: Iterable[str],
        answers: dict[str, bool],
        verdict: Literal["pass", "fail"] | None,
        author_id: str,
        author_name: str,
    ) -> list[HumanLabelRecord]:
        """Store a human's own (blind) answers; once per human and grading."""
        return await self._db.run(
            self.add_in,
            grading_id,
            question_ids=question_ids,
            answers=answers,
            verdict=verdict,
            author_id=author_id,
            author_name=author_name,
        )

    def add_in(
        self,
        session: Session,
        grading_id: str,
        *,
        question_ids: Iterable[str],
        answers: dict[str, bool],
        verdict: Literal["pass", "fail"] | None,
        author_id: str,
        author_name: str,
        into: AuditBatch | None = None,
    ) -> list[HumanLabelRecord]:
        """``add`` in the caller's transaction: :class:`InvalidReview` naming ``answers``
        when neither an answer nor a verdict is given, or an answer names no question of
        the rubric. ``into``: the audit event is collected there, for the caller to append
        after its other writes (rows first, the audit chain's lock last:
        ``storage.database``)."""
        if not answers and verdict is None:
            raise InvalidReview("label at least one question or the verdict", field="answers")
        unknown = sorted(set(answers) - set(question_ids))
        if unknown:
            raise InvalidReview(f"unknown question(s) {', '.join(unknown)}", field="answers")
        # the grading's row locked (PostgreSQL; SQLite has one writer): two labellings
        # by one human at once store one, the other finds it
        if session.get(GradingRecord, grading_id, with_for_update=self._db.postgres) is None:
            raise NotFound(f"no grading {grading_id}")
        earlier = session.execute(
            select(col(HumanLabelRecord.id)).where(
                col(HumanLabelRecord.grading_id) == grading_id,
                col(HumanLabelRecord.author_id) == author_id,
                col(HumanLabelRecord.source) == "blind",
            )
        )
        if earlier.first() is not None:
            raise Conflict("you have already labelled this grading")
        now = self._db.clock()

        def label(**item: Any) -> HumanLabelRecord:
            return HumanLabelRecord(
                grading_id=grading_id,
                source="blind",
                author_id=author_id,
                author_name=author_name,
                created_at=now,
                **item,
            )

        labels = [label(question_id=qid, answer=value) for qid, value in answers.items()]
        if verdict is not None:
            labels.append(label(verdict=verdict))
        session.add_all(labels)
        session.flush()
        self._db.audit(
            session,
            "review.labelled",
            entity_type="grading",
            entity_id=grading_id,
            actor=author_id,
            payload={"answers": {q: a for q, a in answers.items()}, "verdict": verdict},
            rows=labels,
            into=into,
        )
        return labels

    @staticmethod
    def blind_in(session: Session, grading_id: str, author_id: str) -> list[HumanLabelRecord]:
        """``author_id``'s own (blind) labels of the grading, in the order they were given
        (the answers, then the verdict if one was given); empty when none were."""
        query = (
            select(HumanLabelRecord)
            .where(
                col(HumanLabelRecord.grading_id) == grading_id,
                col(HumanLabelRecord.author_id) == author_id,
                col(HumanLabelRecord.source) == "blind",
            )
            .order_by(col(HumanLabelRecord.id))
        )
        return list(session.execute(query).scalars())
