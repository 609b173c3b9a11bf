"""Reading every grading in a filter for export, in batches, from one snapshot.

``ExportReads.open`` holds one read transaction (REPEATABLE READ on PostgreSQL, one
deferred transaction on SQLite) while the caller streams: the rubrics in scope are read
first (so a CSV header can name every question), then gradings oldest first in keyset
batches with their answers, overrides and failure tags. Memory stays bounded by one
batch.

The transaction outlives any one call, so it is ``Database.held_read``: a session
held open on a thread of its own, each batch one hop there; it is closed when the
stream ends, however it ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from api.reports.effective import overrides_by_grading
from api.reports.filters import ReportFilter, filtered, joined
from api.service.presenters import stand_in_rubric
from judge.rubric import Rubric, rubric_from_mapping
from storage.catalog import rubric_key
from storage.database import Database, HeldRead
from storage.models import GradingView
from storage.review_tables import FailureTagRecord, OverrideRecord
from storage.tables import AnswerRecord, GradingRecord, RubricVersionRecord, SubmissionRecord

__all__ = [
    "TURN_EVERY",
    "ExportReads",
    "ExportedGrading",
    "GradingExport",
    "answered_in_scope",
    "attach",
    "rubric_for",
    "rubrics_in_scope",
]

#: gradings fetched per batch
BATCH = 500
#: items streamed between two turns of the event loop: the consumer formats each (about
#: 0.5 ms in JSON lines), and a whole batch in one go held up the graders and requests of
#: the process for about a quarter of a second; a turn per item cost 5-8 % more CPU
TURN_EVERY = 10


@dataclass(frozen=True)
class ExportedGrading:
    """A grading with its answers and submission, overrides and tags in force."""

    view: GradingView
    overrides: tuple[OverrideRecord, ...]
    tags: tuple[FailureTagRecord, ...]


@dataclass(frozen=True)
class GradingExport:
    """The rubrics in scope, by ``(id, version)``, the question ids the gradings' answers
    hold (``answered_questions``), and the gradings to stream."""

    rubrics: dict[tuple[str, str], Rubric]
    gradings: AsyncIterator[ExportedGrading]
    answered_questions: tuple[str, ...] = ()


class ExportReads:
    """Streaming every grading of a filter."""

    def __init__(self, db: Database, current: Mapping[str, Rubric]) -> None:
        """Work through ``db``; ``current``: the rubric files' current versions by id
        (``RubricCatalog.current``), which a grading whose version is not stored reads
        with (:func:`rubrics_in_scope`)."""
        self._db = db
        self._current = current

    @asynccontextmanager
    async def open(
        self, filters: ReportFilter, *, batch: int = BATCH
    ) -> AsyncIterator[GradingExport]:
        """The rubrics in scope and the gradings of ``filters``, streamed from one snapshot."""
        async with self._db.held_read() as snapshot:
            rubrics = await snapshot.run(rubrics_in_scope, filters, self._current)
            answered = await snapshot.run(answered_in_scope, filters)
            gradings = _stream(snapshot, filters, batch)
            try:
                yield GradingExport(rubrics=rubrics, gradings=gradings, answered_questions=answered)
            finally:
                await gradings.aclose()


def rubrics_in_scope(
    session: Session, filters: ReportFilter, current: Mapping[str, Rubric]
) -> dict[tuple[str, str], Rubric]:
    """The stored rubrics of the gradings in ``filters``, by ``(id, version)``; for a
    version no stored rubric is (SREGym's imported verdicts, version ``sregym``), the
    current version of the same rubric (``current``: the rubric files' versions by id,
    ``RubricCatalog.current``), which a grading reads with when it asks every question
    the grading answers (:func:`rubric_for`): the rubric the grading object shows
    (``api.service.presenters.rubric_shown``), whatever version was stored last."""
    pairs = filtered(
        joined(col(GradingRecord.rubric_id), col(GradingRecord.rubric_version)), filters
    ).distinct()
    wanted: list[tuple[str, str]] = [(r, v) for r, v in session.execute(pairs)]
    if not wanted:
        return {}
    keys = [rubric_key(r, v) for r, v in wanted]
    query = select(RubricVersionRecord).where(col(RubricVersionRecord.key).in_(keys))
    found = {
        (record.rubric_id, record.version): _rubric(record)
        for record in session.execute(query).scalars()
    }
    for rubric_id, version in wanted:
        stand_in = current.get(rubric_id)
        if (rubric_id, version) not in found and stand_in is not None:
            found[(rubric_id, version)] = stand_in
    return found


def _rubric(record: RubricVersionRecord) -> Rubric:
    return rubric_from_mapping(record.content, source=f"stored rubric {record.key}")


def rubric_for(
    rubrics: dict[tuple[str, str], Rubric], grading: GradingRecord, answered: Iterable[str]
) -> Rubric | None:
    """The rubric ``grading`` reads with in an export: its own version, or the current
    version of its rubric as the grading object takes it (``answered``: the question ids
    of its answers; :func:`api.service.presenters.stand_in_rubric`); else None."""
    rubric = rubrics.get((grading.rubric_id, grading.rubric_version))
    if rubric is None or rubric.version == grading.rubric_version:
        return rubric
    return stand_in_rubric(rubric, answered)


def answered_in_scope(session: Session, filters: ReportFilter) -> tuple[str, ...]:
    """The question ids of the answers of the gradings in ``filters``, in answer order:
    also those of gradings whose rubric version is not stored (SREGym's verdicts,
    imported under the version ``sregym``)."""
    a = AnswerRecord
    query = filtered(
        joined(col(a.question_id), func.min(col(a.position)), from_answers=True), filters
    ).group_by(col(a.question_id))
    found = sorted(session.execute(query).all(), key=lambda row: (row[1], row[0]))
    return tuple(question_id for question_id, _ in found)


async def _stream(
    snapshot: HeldRead, filters: ReportFilter, batch: int
) -> AsyncGenerator[ExportedGrading, None]:
    after: tuple[Any, str] | None = None
    while True:
        exported = await snapshot.run(_batch, filters, after, batch)
        if not exported:
            return
        for n, item in enumerate(exported):
            if n % TURN_EVERY == 0:
                await asyncio.sleep(0)
            yield item
        last = exported[-1].view.grading
        after = (last.created_at, last.id)


def _batch(
    session: Session, filters: ReportFilter, after: tuple[Any, str] | None, batch: int
) -> list[ExportedGrading]:
    """The next ``batch`` gradings of ``filters`` after ``(created_at, id)``, attached."""
    query = filtered(joined(GradingRecord, SubmissionRecord), filters)
    if after is not None:
        created_at, grading_id = after
        query = query.where(
            or_(
                col(GradingRecord.created_at) > created_at,
                and_(
                    col(GradingRecord.created_at) == created_at,
                    col(GradingRecord.id) > grading_id,
                ),
            )
        )
    query = query.order_by(col(GradingRecord.created_at), col(GradingRecord.id)).limit(batch)
    pairs = [(row[0], row[1]) for row in session.execute(query)]
    return attach(session, pairs) if pairs else []


def attach(
    session: Session, pairs: list[tuple[GradingRecord, SubmissionRecord]]
) -> list[ExportedGrading]:
    """Answers, overrides and tags in force for one batch, three queries in all."""
    ids = [g.id for g, _ in pairs]
    answers: dict[str, list[AnswerRecord]] = {i: [] for i in ids}
    query = (
        select(AnswerRecord)
        .where(col(AnswerRecord.grading_id).in_(ids))
        .order_by(col(AnswerRecord.grading_id), col(AnswerRecord.position))
    )
    for answer in session.execute(query).scalars():
        answers[answer.grading_id].append(answer)
    overrides = overrides_by_grading(session, ids)
    tags: dict[str, list[FailureTagRecord]] = {i: [] for i in ids}
    tag_query = (
        select(FailureTagRecord)
        .where(
            col(FailureTagRecord.grading_id).in_(ids),
            col(FailureTagRecord.removed_at).is_(None),
        )
        .order_by(col(FailureTagRecord.id))
    )
    for tag in session.execute(tag_query).scalars():
        tags[tag.grading_id].append(tag)
    return [
        ExportedGrading(
            view=GradingView(grading=g, answers=tuple(answers[g.id]), submission=s),
            overrides=tuple(overrides[g.id]),
            tags=tuple(tags[g.id]),
        )
        for g, s in pairs
    ]
