"""The review queue, review claims, blind human labels and failure tags."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

from sqlalchemy import String, and_, case, cast, exists, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from storage.base import StoreBase
from storage.errors import Conflict, InvalidReview, NotFound
from storage.review_tables import (
    HumanLabelRecord,
    ReviewClaimRecord,
)
from storage.tables import AnswerRecord, GradingRecord, SubmissionRecord

__all__ = ["LOW_CONFIDENCE", "REVIEW_REASONS", "ReviewItem", "ReviewStore"]

#: a judge answer below this confidence asks for a human
LOW_CONFIDENCE = 0.5
#: reasons a grading needs a human, most urgent first
REVIEW_REASONS = (
    "unscored",
    "evidence_unverified",
    "override_outdated",
    "judge_split",
    "needs_review",
    "decisive",
    "low_confidence",
    "self_preference",
    "provisional_sample",
    "credential_leaked",
    "injection_suspected",
    "grounding_failed",
)


@dataclass(frozen=True)
class ReviewItem:
    """A grading in the queue with why it is there and who holds it."""

    grading: GradingRecord
    submission: SubmissionRecord
    answers: tuple[AnswerRecord, ...]
    reasons: tuple[str, ...]
    claim: ReviewClaimRecord | None


def _low_confidence() -> object:
    return exists().where(
        AnswerRecord.grading_id == GradingRecord.id,
        col(AnswerRecord.confidence) < LOW_CONFIDENCE,
    )


def _reason_filter(reason: str) -> object:
    if reason == "unscored":
        return GradingRecord.status == "unscored"
    if reason == "decisive":
        return and_(GradingRecord.status == "graded", col(GradingRecord.decisive).is_(True))
    if reason == "low_confidence":
        return _low_confidence()
    return cast(GradingRecord.review_reasons, String).like(f'%"{reason}"%')


class ReviewStore(StoreBase):
    """Queue reads, claims, labels and tags."""

    async def review_queue(
        self,
        *,
        principal_id: str,
        agent: str | None = None,
        scenario_id: str | None = None,
        reason: str | None = None,
        limit: int = 50,
    ) -> list[ReviewItem]:
        """Gradings that need a human, most urgent first, without done items or
        items another adjudicator holds a valid claim on."""
        now = self._clock()
        needs = or_(
            GradingRecord.status == "unscored",
            col(GradingRecord.needs_review).is_(True),
            and_(GradingRecord.status == "graded", col(GradingRecord.decisive).is_(True)),
            _low_confidence(),
        )
        urgency = case(
            (GradingRecord.status == "unscored", 0),
            (cast(GradingRecord.review_reasons, String).like('%"evidence_unverified"%'), 1),
            (col(GradingRecord.needs_review).is_(True), 2),
            (col(GradingRecord.decisive).is_(True), 3),
            else_=4,
        )
        query = (
            select(GradingRecord, SubmissionRecord, ReviewClaimRecord)
            .join(SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id))
            .outerjoin(
                ReviewClaimRecord, col(ReviewClaimRecord.grading_id) == col(GradingRecord.id)
            )
            .where(
                col(GradingRecord.is_current).is_(True),
                needs,
                col(ReviewClaimRecord.done_at).is_(None),
                or_(
                    col(ReviewClaimRecord.claimed_until).is_(None),
                    col(ReviewClaimRecord.claimed_until) < now,
                    ReviewClaimRecord.claimed_by == principal_id,
                ),
            )
            .order_by(urgency, col(GradingRecord.created_at), col(GradingRecord.id))
            .limit(min(limit, 500))
        )
        if agent is not None:
            query = query.where(SubmissionRecord.agent == agent)
        if scenario_id is not None:
            query = query.where(SubmissionRecord.scenario_id == scenario_id)
        if reason is not None:
            query = query.where(_reason_filter(reason))
        async with self._read() as session:
            rows = list((await session.execute(query)).all())
            ids = [g.id for g, _, _ in rows]
            low = await self._low_confidence_ids(session, ids)
            answers = await self._answers_of(session, ids)
        return [
            ReviewItem(
                grading=g,
                submission=s,
                answers=tuple(answers.get(g.id, [])),
                reasons=self._reasons(g, g.id in low),
                claim=c,
            )
            for g, s, c in rows
        ]

    async def _answers_of(
        self, session: AsyncSession, ids: Sequence[str]
    ) -> dict[str, list[AnswerRecord]]:
        found: dict[str, list[AnswerRecord]] = {}
        if not ids:
            return found
        query = (
            select(AnswerRecord)
            .where(col(AnswerRecord.grading_id).in_(list(ids)))
            .order_by(col(AnswerRecord.grading_id), col(AnswerRecord.position))
        )
        for answer in (await session.execute(query)).scalars():
            found.setdefault(answer.grading_id, []).append(answer)
        return found

    async def _low_confidence_ids(self, session: AsyncSession, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        query = select(AnswerRecord.grading_id).where(
            col(AnswerRecord.grading_id).in_(list(ids)),
            col(AnswerRecord.confidence) < LOW_CONFIDENCE,
        )
        return set((await session.execute(query)).scalars())

    @staticmethod
    def _reasons(grading: GradingRecord, low_confidence: bool) -> tuple[str, ...]:
        found: list[str] = []
        if grading.status == "unscored":
            found.append("unscored")
        found.extend(r for r in grading.review_reasons or [] if r != "unscored")
        if grading.status == "graded" and grading.decisive:
            found.append("decisive")
        if low_confidence:
            found.append("low_confidence")
        rank = {r: i for i, r in enumerate(REVIEW_REASONS)}
        return tuple(sorted(dict.fromkeys(found), key=lambda r: rank.get(r, len(rank))))

    async def claim_review(
        self, grading_id: str, *, principal_id: str, principal_name: str, minutes: float
    ) -> ReviewClaimRecord:
        """Hold a grading for review; Conflict when another holds a valid claim."""
        now = self._clock()
        async with self._write() as session:
            if await session.get(GradingRecord, grading_id) is None:
                raise NotFound(f"no grading {grading_id}")
            claim = await session.get(ReviewClaimRecord, grading_id)
            if claim is None:
                claim = ReviewClaimRecord(grading_id=grading_id)
                session.add(claim)
            held = claim.claimed_until is not None and claim.claimed_until > now
            if held and claim.claimed_by != principal_id:
                raise Conflict(
                    f"{claim.claimed_by_name} holds this review until {claim.claimed_until}"
                )
            claim.claimed_by, claim.claimed_by_name = principal_id, principal_name
            claim.claimed_until = now + timedelta(minutes=minutes)
            claim.done_at = None
            await session.flush()
            await self._audit(
                session,
                "review.claimed",
                entity_type="grading",
                entity_id=grading_id,
                actor=principal_id,
                payload={"until": claim.claimed_until.isoformat()},
            )
            return claim

    async def finish_review(self, grading_id: str, *, principal_id: str) -> None:
        """Mark a review done: the grading leaves the queue."""
        async with self._write() as session:
            if await session.get(GradingRecord, grading_id) is None:
                raise NotFound(f"no grading {grading_id}")
            claim = await session.get(ReviewClaimRecord, grading_id)
            if claim is None:
                claim = ReviewClaimRecord(grading_id=grading_id)
                session.add(claim)
            claim.done_at, claim.done_by = self._clock(), principal_id
            claim.claimed_by = claim.claimed_by_name = None
            claim.claimed_until = None
            await session.flush()
            await self._audit(
                session,
                "review.done",
                entity_type="grading",
                entity_id=grading_id,
                actor=principal_id,
                payload={},
            )

    async def add_labels(
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
        known = set(question_ids)
        unknown = sorted(set(answers) - known)
        if unknown:
            raise InvalidReview(f"unknown question(s) {', '.join(unknown)}", field="answers")
        async with self._write() as session:
            if await session.get(GradingRecord, grading_id) is None:
                raise NotFound(f"no grading {grading_id}")
            earlier = await session.execute(
                select(HumanLabelRecord.id).where(
                    HumanLabelRecord.grading_id == grading_id,
                    HumanLabelRecord.author_id == author_id,
                    HumanLabelRecord.source == "blind",
                )
            )
            if earlier.first() is not None:
                raise Conflict("you have already labelled this grading")
            now = self._clock()
            labels = [
                HumanLabelRecord(
                    grading_id=grading_id,
                    question_id=qid,
                    answer=value,
                    source="blind",
                    author_id=author_id,
                    author_name=author_name,
                    created_at=now,
                )
                for qid, value in answers.items()
            ]
            if verdict is not None:
                labels.append(
                    HumanLabelRecord(
                        grading_id=grading_id,
                        verdict=verdict,
                        source="blind",
                        author_id=author_id,
                        author_name=author_name,
                        created_at=now,
                    )
                )
            session.add_all(labels)
            await session.flush()
            await self._audit(
                session,
                "review.labelled",
                entity_type="grading",
                entity_id=grading_id,
                actor=author_id,
                payload={"answers": {q: a for q, a in answers.items()}, "verdict": verdict},
            )
            return labels

    async def list_labels(self, grading_id: str) -> list[HumanLabelRecord]:
        """Every human label of a grading, oldest first."""
        query = (
            select(HumanLabelRecord)
            .where(HumanLabelRecord.grading_id == grading_id)
            .order_by(col(HumanLabelRecord.id))
        )
        async with self._read() as session:
            return list((await session.execute(query)).scalars())
