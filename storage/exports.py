"""Reading every grading in a filter for export, in batches, from one snapshot.

``ExportReads.open`` holds one read transaction (REPEATABLE READ on PostgreSQL, one
deferred transaction on SQLite) while the caller streams: the rubrics in scope are read
first (so a CSV header can name every question), then gradings oldest first in keyset
batches with their answers, overrides and failure tags. Memory stays bounded by one
batch.

The transaction outlives any one call, so it cannot go through ``Database.run_read``:
:func:`held_snapshot` keeps a synchronous session open on a thread of its own and runs
each batch there (one thread hop per batch); the session is closed when the stream
ends, however it ends.
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

from judge.rubric import Rubric, rubric_from_mapping
from storage.catalog import rubric_key
from storage.database import Database
from storage.db import read_only
from storage.effective import overrides_by_grading
from storage.models import GradingView
from storage.report_queries import ReportFilter, filtered, joined
from storage.review_tables import FailureTagRecord, OverrideRecord
from storage.tables import AnswerRecord, GradingRecord, RubricVersionRecord, SubmissionRecord

__all__ = [
    "ExportReads",
    "ExportedGrading",
    "GradingExport",
    "HeldSnapshot",
    "attach",
    "held_snapshot",
    "rubrics_in_scope",
]

#: gradings fetched per batch
BATCH = 500

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True)
class ExportedGrading:
    """A grading with its answers and submission, overrides and tags in force."""

    view: GradingView
    overrides: tuple[OverrideRecord, ...]
    tags: tuple[FailureTagRecord, ...]


@dataclass(frozen=True)
class GradingExport:
    """The rubrics in scope, by ``(id, version)``, and the gradings to stream."""

    rubrics: dict[tuple[str, str], Rubric]
    gradings: AsyncIterator[ExportedGrading]


class HeldSnapshot:
    """A read-only snapshot held open across awaits: a synchronous session used only
    from one thread of its own (see :func:`held_snapshot`)."""

    def __init__(self, session: Session, thread: ThreadPoolExecutor) -> None:
        """Run calls on ``session`` in ``thread`` (a one-thread executor)."""
        self._session = session
        self._thread = thread

    async def run(
        self, fn: Callable[Concatenate[Session, _P], _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(session, *args, **kwargs)`` on the snapshot's thread, in a copy of the
        caller's context (its log fields). Objects ``fn`` returns are detached from the
        session (``fn`` must load what the caller reads)."""
        return await _on(self._thread, _detached, self._session, fn, args, kwargs)


@asynccontextmanager
async def held_snapshot(db: Database) -> AsyncIterator[HeldSnapshot]:
    """One read-only transaction of ``db`` for as long as the block runs: every
    :meth:`HeldSnapshot.run` sees the same data (REPEATABLE READ on PostgreSQL, one
    deferred transaction on SQLite), as ``Database.run_read`` does for one call.

    The session lives on a thread of its own, so a block cancelled or failing while a
    call is under way closes it only after that call ends. (This belongs in
    ``Database``, beside ``run_read``, as a method that opens a held read session.)
    """
    session = sessionmaker(read_only(db.engine), expire_on_commit=False)()
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sre-judge-snapshot")
    try:
        try:
            await _on(thread, _begin, session, db.postgres)
            yield HeldSnapshot(session, thread)
        finally:
            # queued behind any call still under way; runs even if this wait is cancelled
            await _on(thread, session.close)
    finally:
        thread.shutdown(wait=False)


def _begin(session: Session, postgres: bool) -> None:
    """Begin ``session``'s read transaction: REPEATABLE READ on PostgreSQL, BEGIN
    DEFERRED on SQLite (``storage.db.read_only``)."""
    session.begin()
    if postgres:
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    else:
        session.connection()


def _detached(
    session: Session, fn: Callable[..., _T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _T:
    """``fn(session, *args, **kwargs)``, then every object it loaded detached: the caller
    reads them on another thread, and the next call must not change them."""
    try:
        return fn(session, *args, **kwargs)
    finally:
        session.expunge_all()


async def _on(thread: ThreadPoolExecutor, call: Callable[..., _T], *args: Any) -> _T:
    """``call(*args)`` on ``thread`` in a copy of the caller's context; a cancelled caller
    waits for it to end first (the next call, or the close, would queue behind it anyway)."""
    context = contextvars.copy_context()
    future = asyncio.get_running_loop().run_in_executor(thread, context.run, call, *args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await future
        raise


class ExportReads:
    """Streaming every grading of a filter."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    @asynccontextmanager
    async def open(
        self, filters: ReportFilter, *, batch: int = BATCH
    ) -> AsyncIterator[GradingExport]:
        """``async with store.exports.open(f) as export: async for g in export.gradings``."""
        async with held_snapshot(self._db) as snapshot:
            rubrics = await snapshot.run(rubrics_in_scope, filters)
            gradings = _stream(snapshot, filters, batch)
            try:
                yield GradingExport(rubrics=rubrics, gradings=gradings)
            finally:
                await gradings.aclose()


def rubrics_in_scope(session: Session, filters: ReportFilter) -> dict[tuple[str, str], Rubric]:
    """The stored rubrics of the gradings in ``filters``, by ``(id, version)``."""
    pairs = filtered(
        joined(col(GradingRecord.rubric_id), col(GradingRecord.rubric_version)), filters
    ).distinct()
    keys = [rubric_key(r, v) for r, v in session.execute(pairs)]
    if not keys:
        return {}
    query = select(RubricVersionRecord).where(col(RubricVersionRecord.key).in_(keys))
    return {
        (record.rubric_id, record.version): rubric_from_mapping(
            record.content, source=f"stored rubric {record.key}"
        )
        for record in session.execute(query).scalars()
    }


async def _stream(
    snapshot: HeldSnapshot, filters: ReportFilter, batch: int
) -> AsyncGenerator[ExportedGrading, None]:
    after: tuple[Any, str] | None = None
    while True:
        exported = await snapshot.run(_batch, filters, after, batch)
        if not exported:
            return
        for item in exported:
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
