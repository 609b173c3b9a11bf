"""Reading imported SREGym rows back, each with the grading an export shows for it.

Rows come in the order of the results folder (file path, character by character as
``storage.bytewise`` orders it on every database, then line), in batches, from
one snapshot. The submission filters of a :class:`ReportFilter` (agent, model, scenario,
run, ground-truth source, scenario set) select rows; its grading filters (rubric, judge,
dates, current only) select the grading shown: the newest grading of the attempt in the
filter. An attempt that was graded, but by no grading in the filter, is left out; an
attempt that was never graded (timed out, failed deploy, nothing submitted) is kept.

The stream holds one synchronous read-only session for as long as it is open
(``Database.held_read``: REPEATABLE READ on PostgreSQL, one deferred
transaction on SQLite, used from one thread of its own): each batch is one thread hop,
and every batch sees the same data.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from api.reports.export_reads import (
    TURN_EVERY,
    ExportedGrading,
    attach,
    rubrics_in_scope,
)
from api.reports.filters import ReportFilter, filtered, joined, submission_filtered
from judge.rubric import Rubric
from storage.bytewise import bytewise
from storage.database import Database, HeldRead
from storage.imports.tables import SregymOriginalRowRecord
from storage.tables import GradingRecord, SubmissionRecord

__all__ = ["OriginalRow", "OriginalRowExport", "OriginalRowReads"]

#: rows fetched per batch
BATCH = 500

#: where the stream of rows goes on from: the last row's (path, line, submission id)
_After = tuple[str, int, str]


@dataclass(frozen=True)
class OriginalRow:
    """An imported CSV row, its submission, and the grading shown for it (if any)."""

    original: SregymOriginalRowRecord
    submission: SubmissionRecord
    grading: ExportedGrading | None


@dataclass(frozen=True)
class OriginalRowExport:
    """The rubrics in scope, by ``(id, version)``, and the rows to stream."""

    rubrics: dict[tuple[str, str], Rubric]
    #: every column of the rows' files, in the order first seen
    columns: list[str]
    rows: AsyncIterator[OriginalRow]


class OriginalRowReads:
    """Streaming the imported SREGym rows of a filter."""

    def __init__(self, db: Database, current: Mapping[str, Rubric]) -> None:
        """Work through ``db``; ``current``: the rubric files' current versions by id
        (``api.reports.export_reads.rubrics_in_scope``)."""
        self._db = db
        self._current = current

    @asynccontextmanager
    async def open(
        self, filters: ReportFilter, *, batch: int = BATCH
    ) -> AsyncIterator[OriginalRowExport]:
        """The rows of ``filters`` with the grading shown for each, from one snapshot."""
        async with self._db.held_read() as snapshot:
            rubrics, columns = await snapshot.run(_heading, filters, self._current)
            rows = _stream(snapshot, filters, batch)
            try:
                yield OriginalRowExport(rubrics=rubrics, columns=columns, rows=rows)
            finally:
                await rows.aclose()


def _heading(
    session: Session, filters: ReportFilter, current: Mapping[str, Rubric]
) -> tuple[dict[tuple[str, str], Rubric], list[str]]:
    """The rubrics in scope and every column of the rows' files, in the order first seen."""
    rubrics = rubrics_in_scope(session, filters, current)
    o = SregymOriginalRowRecord
    query = select(col(o.columns)).join(
        SubmissionRecord, col(SubmissionRecord.id) == col(o.submission_id)
    )
    query = submission_filtered(query, filters).order_by(bytewise(col(o.path)), col(o.line))
    seen: dict[str, None] = {}
    for columns in session.execute(query).scalars():
        for column in columns:
            seen.setdefault(column)
    return rubrics, list(seen)


async def _stream(
    snapshot: HeldRead, filters: ReportFilter, batch: int
) -> AsyncGenerator[OriginalRow, None]:
    after: _After | None = None
    while True:
        rows, after = await snapshot.run(_batch, filters, after, batch)
        if after is None:
            return
        for n, row in enumerate(rows):
            if n % TURN_EVERY == 0:
                await asyncio.sleep(0)
            yield row


def _batch(
    session: Session, filters: ReportFilter, after: _After | None, batch: int
) -> tuple[list[OriginalRow], _After | None]:
    """The rows of the next batch after ``after`` (graded by no grading in the filter:
    left out), and where the next batch starts; None once there are no more rows."""
    o = SregymOriginalRowRecord
    query = select(o, SubmissionRecord).join(
        SubmissionRecord, col(SubmissionRecord.id) == col(o.submission_id)
    )
    query = submission_filtered(query, filters)
    if after is not None:
        path, line, last = after
        query = query.where(
            or_(
                bytewise(col(o.path)) > path,
                and_(col(o.path) == path, col(o.line) > line),
                and_(col(o.path) == path, col(o.line) == line, col(o.submission_id) > last),
            )
        )
    order = (bytewise(col(o.path)), col(o.line), col(o.submission_id))
    query = query.order_by(*order).limit(batch)
    pairs = [(row[0], row[1]) for row in session.execute(query)]
    if not pairs:
        return [], None
    shown, graded = _gradings(session, filters, [s.id for _, s in pairs])
    rows = [
        OriginalRow(original=original, submission=submission, grading=shown.get(submission.id))
        for original, submission in pairs
        if submission.id in shown or submission.id not in graded
    ]
    last_row = pairs[-1][0]
    return rows, (last_row.path, last_row.line, last_row.submission_id)


def _gradings(
    session: Session, filters: ReportFilter, ids: list[str]
) -> tuple[dict[str, ExportedGrading], set[str]]:
    """The newest grading in the filter per submission, and the submissions ever graded."""
    query = (
        filtered(joined(GradingRecord, SubmissionRecord), filters)
        .where(col(GradingRecord.submission_id).in_(ids))
        .order_by(col(GradingRecord.created_at), col(GradingRecord.id))
    )
    newest: dict[str, tuple[GradingRecord, SubmissionRecord]] = {}
    for row in session.execute(query):
        newest[row[0].submission_id] = (row[0], row[1])
    attached = attach(session, list(newest.values()))
    ever = select(col(GradingRecord.submission_id)).where(col(GradingRecord.submission_id).in_(ids))
    graded = set(session.execute(ever.distinct()).scalars())
    return {item.view.submission.id: item for item in attached}, graded
