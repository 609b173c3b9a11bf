"""Reading imported SREGym rows back, each with the grading an export shows for it.

Rows come in the order of the results folder (file path, then line), in batches, from
one snapshot. The submission filters of a :class:`ReportFilter` (agent, model, scenario,
run, ground-truth source) select rows; its grading filters (rubric, judge, dates,
current only) select the grading shown: the newest grading of the attempt in the
filter. An attempt that was graded, but by no grading in the filter, is left out; an
attempt that was never graded (timed out, failed deploy, nothing submitted) is kept.

The stream holds one synchronous read-only session (REPEATABLE READ on PostgreSQL, one
deferred transaction on SQLite) for as long as it is open, and uses it from one worker
thread of its own: each batch is one thread hop, and every batch sees the same data.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session, sessionmaker
from sqlmodel import col

from judge.rubric import Rubric
from storage.database import Database
from storage.db import read_only
from storage.exports import ExportedGrading, attach, rubrics_in_scope
from storage.imports.tables import SregymOriginalRowRecord
from storage.report_queries import ReportFilter, filtered, joined, submission_filtered
from storage.tables import GradingRecord, SubmissionRecord

__all__ = ["OriginalRow", "OriginalRowExport", "OriginalRowReads"]

#: rows fetched per batch
BATCH = 500

_P = ParamSpec("_P")
_T = TypeVar("_T")

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

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    @asynccontextmanager
    async def open(
        self, filters: ReportFilter, *, batch: int = BATCH
    ) -> AsyncIterator[OriginalRowExport]:
        """``async with store.sregym_rows.open(f) as export: async for r in export.rows``."""
        async with _HeldSnapshot(self._db) as snapshot:
            rubrics, columns = await snapshot.run(_heading, filters)
            rows = _stream(snapshot, filters, batch)
            try:
                yield OriginalRowExport(rubrics=rubrics, columns=columns, rows=rows)
            finally:
                await rows.aclose()


class _HeldSnapshot:
    """One read-only snapshot held open across several hops to one worker thread.

    ``Database.run_read`` ends its snapshot with its hop; a stream read batch by batch
    needs the same snapshot for all of them. The session lives in a thread of its own
    (a one-thread executor), so it is never used from two threads; a caller cancelled
    during a hop waits for the hop to end, and the session closes (rolling back) after
    the last hop.
    """

    def __init__(self, db: Database) -> None:
        self._sessions = sessionmaker(read_only(db.sync_engine), expire_on_commit=False)
        self._repeatable_read = db.postgres
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sregym-rows")
        self._session: Session | None = None

    async def __aenter__(self) -> _HeldSnapshot:
        try:
            self._session = await self._hop(self._begin)
        except BaseException:
            self._thread.shutdown(wait=False)
            raise
        return self

    async def __aexit__(self, *_exc: object) -> None:
        try:
            if self._session is not None:
                await self._hop(self._session.close)
        finally:
            self._session = None
            self._thread.shutdown(wait=False)

    async def run(
        self, fn: Callable[Concatenate[Session, _P], _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(session, *args, **kwargs)`` in the snapshot, in its thread."""
        assert self._session is not None, "the snapshot is not open"
        return await self._hop(fn, self._session, *args, **kwargs)

    def _begin(self) -> Session:
        session = self._sessions()
        try:
            session.begin()
            if self._repeatable_read:
                session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        except BaseException:
            session.close()
            raise
        return session

    async def _hop(self, call: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """``call(*args, **kwargs)`` in the snapshot's thread, in a copy of the caller's
        context (its log fields); a cancelled caller waits for it to end first."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._thread, lambda: context.run(call, *args, **kwargs))
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            with contextlib.suppress(BaseException):
                await future
            raise


def _heading(
    session: Session, filters: ReportFilter
) -> tuple[dict[tuple[str, str], Rubric], list[str]]:
    """The rubrics in scope and every column of the rows' files, in the order first seen."""
    rubrics = rubrics_in_scope(session, filters)
    o = SregymOriginalRowRecord
    query = select(col(o.columns)).join(
        SubmissionRecord, col(SubmissionRecord.id) == col(o.submission_id)
    )
    query = submission_filtered(query, filters).order_by(col(o.path), col(o.line))
    seen: dict[str, None] = {}
    for columns in session.execute(query).scalars():
        for column in columns:
            seen.setdefault(column)
    return rubrics, list(seen)


async def _stream(
    snapshot: _HeldSnapshot, filters: ReportFilter, batch: int
) -> AsyncGenerator[OriginalRow, None]:
    after: _After | None = None
    while True:
        rows, after = await snapshot.run(_batch, filters, after, batch)
        if after is None:
            return
        for row in rows:
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
                col(o.path) > path,
                and_(col(o.path) == path, col(o.line) > line),
                and_(col(o.path) == path, col(o.line) == line, col(o.submission_id) > last),
            )
        )
    query = query.order_by(col(o.path), col(o.line), col(o.submission_id)).limit(batch)
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
