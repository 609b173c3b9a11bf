"""Reading gradings: one, a filtered page, their judge calls and their history.

Lists are ordered newest first by ``(listed_at, id)`` and paginated by keyset: the
cursor holds the last row's ``(listed_at, id)``, signed (``storage.cursors``), and the
next page continues strictly after it. A grading is listed at its creation time, and a
promoted regrade item at the place of the grading it replaced (``listed_at``): new
gradings are newer than every listed one and a promotion moves no submission, so
inserts and promotions between pages never shift, duplicate or skip rows of later pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, Self, TypeVar

from sqlalchemy import ColumnElement, Select, and_, exists, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.spec import PANEL_PREFIX, panel_spec_pattern
from storage.audit.state import COVERS
from storage.canonical import iso_utc
from storage.cursors import CursorCodec
from storage.database import Database
from storage.errors import InvalidCursor, NotFound
from storage.models import GradingFilter, GradingView
from storage.review_tables import FailureTagRecord, OverrideRecord
from storage.search import TextMatches
from storage.tables import (
    AnswerRecord,
    AuditRecord,
    GradingRecord,
    JudgeCallRecord,
    SubmissionRecord,
)

__all__ = [
    "GradingReads",
    "decode_cursor",
    "encode_cursor",
    "grading_position",
    "judge_labelled",
    "overrides_of",
    "records_by_grading",
    "tags_of",
    "where_equal",
]

MAX_PAGE = 500
_R = TypeVar("_R")


def judge_labelled(label: str) -> ColumnElement[bool]:
    """Gradings whose judge is ``label`` named without base URLs, as submitters are shown
    it: its model alone, or ``backend:model``; a panel (backend ``panel``) by its members'
    ``backend:model`` joined by ``+`` (or ``,``), alone or after ``panel:``.

    A panel's recorded model and spec hold its members' base URLs, so a panel is matched
    by its members' names (``judge.spec.panel_spec_pattern``), whatever URLs the label
    gives them: were the URLs compared, a filter would tell whoever guessed them which
    internal address a judge runs at."""
    g = GradingRecord
    labelled = col(g.judge_backend) + ":" + col(g.judge_model)
    single = and_(
        col(g.judge_backend) != "panel", or_(col(g.judge_model) == label, labelled == label)
    )
    named = label if label.startswith(PANEL_PREFIX) else PANEL_PREFIX + label
    pattern = panel_spec_pattern(named)
    if pattern is None:
        return single
    panel = and_(col(g.judge_backend) == "panel", col(g.judge_spec).regexp_match(pattern))
    return or_(single, panel)


class _Filterable(Protocol):
    """A query that takes WHERE clauses (a ``Select`` of any columns)."""

    def where(self, *clauses: Any) -> Self: ...


_Q = TypeVar("_Q", bound=_Filterable)
#: grading ids per IN list
_IDS_PER_QUERY = 500
#: what an issued cursor can hold: a grading id and a time both databases store
_GRADING_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def encode_cursor(codec: CursorCodec, at: datetime, grading_id: str) -> str:
    """The signed cursor of the position after ``(at, grading_id)``: a grading's time
    in the list's order (``listed_at`` for the list of gradings) and its id."""
    return codec.encode([iso_utc(at), grading_id])


def decode_cursor(codec: CursorCodec, cursor: str) -> tuple[datetime, str]:
    """The ``(time, id)`` of a cursor ``codec`` signed; raises InvalidCursor."""
    return grading_position(codec.decode(cursor))


def grading_position(position: Sequence[Any]) -> tuple[datetime, str]:
    """The ``(time, id)`` a signed cursor's position holds (``[stamp, id]``, as
    :func:`encode_cursor` writes them); raises InvalidCursor for anything else."""
    try:
        stamp, grading_id = position
        at = datetime.fromisoformat(stamp)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor("the cursor is not one this service issued") from exc
    forged = (
        not isinstance(grading_id, str)
        or not _GRADING_ID.fullmatch(grading_id)
        or at.utcoffset() is None
        or not _EARLIEST <= at <= _LATEST  # no grading was made then
    )
    if forged:  # signed with our key, so never reached unless the key leaked
        raise InvalidCursor("the cursor is not one this service issued")
    return at, grading_id


def records_by_grading(
    session: Session, model: type[_R], grading_ids: Sequence[str], *where: Any, order: Any
) -> dict[str, list[_R]]:
    """The rows of ``model`` (a table with a ``grading_id``) of each of the gradings,
    ordered by ``order``, in one query per 500 gradings; every grading has a list, empty
    when it has none."""
    found: dict[str, list[_R]] = {gid: [] for gid in grading_ids}
    column = model.grading_id  # type: ignore[attr-defined]
    ids = list(found)
    for start in range(0, len(ids), _IDS_PER_QUERY):
        chunk = ids[start : start + _IDS_PER_QUERY]
        query = select(column, model).where(column.in_(chunk), *where).order_by(*order)
        for grading_id, record in session.execute(query):
            found[grading_id].append(record)
    return found


def overrides_of(session: Session, grading_ids: Sequence[str]) -> dict[str, list[OverrideRecord]]:
    """Every override of each grading, oldest first."""
    order = (col(OverrideRecord.created_at), col(OverrideRecord.id))
    return records_by_grading(session, OverrideRecord, grading_ids, order=order)


def tags_of(session: Session, grading_ids: Sequence[str]) -> dict[str, list[FailureTagRecord]]:
    """The failure tags in force on each grading, oldest first."""
    in_force = col(FailureTagRecord.removed_at).is_(None)
    order = (col(FailureTagRecord.id),)
    return records_by_grading(session, FailureTagRecord, grading_ids, in_force, order=order)


def where_equal(query: _Q, pairs: Iterable[tuple[Any, Any]]) -> _Q:
    """``query`` restricted to each column equal to its value, for the values given (a
    None value does not filter)."""
    for column, value in pairs:
        if value is not None:
            query = query.where(col(column) == value)
    return query


def _filtered(
    query: Select[GradingRecord, SubmissionRecord],
    filters: GradingFilter,
    reviews_where: ColumnElement[bool] | None = None,
) -> Select[GradingRecord, SubmissionRecord]:
    """``query`` filtered; ``reviews_where``: where a grading's tags, override reasons
    and tag notes may select it at all (None: everywhere)."""
    g, s = GradingRecord, SubmissionRecord
    equal: list[tuple[Any, Any]] = [
        (s.agent, filters.agent),
        (s.model, filters.model),
        (s.scenario_id, filters.scenario_id),
        (g.status, filters.status),
        (g.passed, filters.passed),
        (g.held, filters.held),
        (g.needs_review, filters.needs_review),
        (g.rubric_id, filters.rubric_id),
        (g.rubric_version, filters.rubric_version),
    ]
    query = where_equal(query, equal)
    if filters.judge is not None:
        query = query.where(judge_labelled(filters.judge))
    if filters.created_after is not None:
        query = query.where(col(g.created_at) >= filters.created_after)
    if filters.created_before is not None:
        query = query.where(col(g.created_at) < filters.created_before)
    if filters.current_only:
        query = query.where(col(g.is_current).is_(True))
    if filters.tag is not None:
        query = query.where(
            exists().where(
                col(FailureTagRecord.grading_id) == col(g.id),
                col(FailureTagRecord.tag) == filters.tag,
                col(FailureTagRecord.removed_at).is_(None),
            )
        )
        if reviews_where is not None:
            query = query.where(reviews_where)
    if filters.search is not None:
        query = query.where(TextMatches(filters.search, reviews_where))
    return query


class GradingReads:
    """Read-only views of gradings."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        self._cursors = CursorCodec(db.key, "gradings")

    def _views(
        self, session: Session, pairs: Sequence[tuple[GradingRecord, SubmissionRecord]]
    ) -> list[GradingView]:
        """Attach answers to gradings with one query for all of them."""
        ids = [grading.id for grading, _ in pairs]
        answers: dict[str, list[AnswerRecord]] = {i: [] for i in ids}
        if ids:
            query = (
                select(AnswerRecord)
                .where(col(AnswerRecord.grading_id).in_(ids))
                .order_by(col(AnswerRecord.grading_id), col(AnswerRecord.position))
            )
            for answer in session.execute(query).scalars():
                answers[answer.grading_id].append(answer)
        return [
            GradingView(grading=g, answers=tuple(answers[g.id]), submission=s) for g, s in pairs
        ]

    async def get(self, grading_id: str) -> GradingView | None:
        """A grading with its answers and submission, or None."""
        return await self._db.run_read(self.read_one, grading_id)

    def read_one(self, session: Session, grading_id: str) -> GradingView | None:
        """A grading with its answers and submission, or None, in ``session``."""
        query = (
            select(GradingRecord, SubmissionRecord)
            .join(SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id))
            .where(col(GradingRecord.id) == grading_id)
        )
        row = session.execute(query).one_or_none()
        if row is None:
            return None
        return self._views(session, [(row[0], row[1])])[0]

    def read_of_submission(self, session: Session, submission_id: str) -> list[GradingView]:
        """Every grading of one submission (current, superseded, shadow), oldest first."""
        query = (
            select(GradingRecord, SubmissionRecord)
            .join(SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id))
            .where(col(GradingRecord.submission_id) == submission_id)
            .order_by(col(GradingRecord.created_at), col(GradingRecord.id))
        )
        return self._pairs_of(session, query)

    def _pairs_of(
        self, session: Session, query: Select[GradingRecord, SubmissionRecord]
    ) -> list[GradingView]:
        """The views of the (grading, submission) rows ``query`` selects."""
        return self._views(session, [(row[0], row[1]) for row in session.execute(query)])

    async def page(
        self,
        *,
        filters: GradingFilter | None = None,
        after: str | None = None,
        limit: int = 50,
        submitted_by: str | None = None,
    ) -> tuple[list[GradingView], str | None]:
        """A page of gradings, newest first (in list order, ``listed_at``), and the cursor
        of the next page (or None).

        ``submitted_by`` restricts the page to one submitter's submissions.
        """
        return await self._db.run_read(
            self.read_page, filters=filters, after=after, limit=limit, submitted_by=submitted_by
        )

    def read_page(
        self,
        session: Session,
        *,
        filters: GradingFilter | None = None,
        after: str | None = None,
        limit: int = 50,
        submitted_by: str | None = None,
    ) -> tuple[list[GradingView], str | None]:
        """``page`` inside the caller's ``session``.

        With ``submitted_by`` (a submitter's own gradings), tags, override reasons and tag
        notes select only gradings against a ground truth the submitter sent, the only
        ones whose reviews it may read: a filter must not reveal what the grading it
        lists withholds."""
        limit = max(1, min(limit, MAX_PAGE))
        own_truth = (
            None if submitted_by is None else col(SubmissionRecord.ground_truth_source) == "inline"
        )
        query = _filtered(
            select(GradingRecord, SubmissionRecord).join(
                SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id)
            ),
            filters or GradingFilter(),
            own_truth,
        )
        if submitted_by is not None:
            query = query.where(col(SubmissionRecord.submitted_by) == submitted_by)
        listed_at = col(GradingRecord.listed_at)
        if after is not None:
            # a cursor issued before gradings had a list position holds the creation
            # time, which is the position of every grading listed then
            at, grading_id = decode_cursor(self._cursors, after)
            query = query.where(
                or_(listed_at < at, and_(listed_at == at, col(GradingRecord.id) < grading_id))
            )
        query = query.order_by(listed_at.desc(), col(GradingRecord.id).desc()).limit(limit + 1)
        views = self._pairs_of(session, query)
        more = len(views) > limit
        views = views[:limit]
        last = views[-1].grading if views else None
        cursor = encode_cursor(self._cursors, last.listed_at, last.id) if more and last else None
        return views, cursor

    @staticmethod
    def _require_grading(session: Session, grading_id: str) -> GradingRecord:
        grading = session.get(GradingRecord, grading_id)
        if grading is None:
            raise NotFound(f"grading {grading_id!r} does not exist")
        return grading

    async def judge_calls(self, grading_id: str) -> list[JudgeCallRecord]:
        """Every judge call of a grading, in call order; NotFound for an unknown grading."""
        return await self._db.run_read(self.read_judge_calls, grading_id)

    def read_judge_calls(self, session: Session, grading_id: str) -> list[JudgeCallRecord]:
        """``judge_calls`` inside the caller's ``session``."""
        self._require_grading(session, grading_id)
        query = (
            select(JudgeCallRecord)
            .where(col(JudgeCallRecord.grading_id) == grading_id)
            .order_by(col(JudgeCallRecord.created_at), col(JudgeCallRecord.position))
        )
        return list(session.execute(query).scalars())

    async def history(self, grading_id: str) -> list[AuditRecord]:
        """Audit events of a grading and of its submission, the promotion that superseded
        it, and for a regrade item the events of its job that wrote it (created,
        cancelled, resumed), oldest first."""
        return await self._db.run_read(self.read_history, grading_id)

    def read_history(self, session: Session, grading_id: str) -> list[AuditRecord]:
        """``history`` inside the caller's ``session``."""
        grading = self._require_grading(session, grading_id)
        concerning = [
            and_(
                col(AuditRecord.entity_type) == "grading", col(AuditRecord.entity_id) == grading.id
            ),
            and_(
                col(AuditRecord.entity_type) == "submission",
                col(AuditRecord.entity_id) == grading.submission_id,
            ),
        ]
        if grading.superseded_by is not None:
            # the promotion that superseded it is the new grading's event, and changed
            # this one too (no longer current, its revision moved)
            concerning.append(
                and_(
                    col(AuditRecord.entity_type) == "grading",
                    col(AuditRecord.entity_id) == grading.superseded_by,
                    col(AuditRecord.event) == "grading.promoted",
                )
            )
        if grading.regrade_job_id is not None:
            # the job's events that wrote this item (created, cancelled, resumed) cover it;
            # the job's id bounds them to its few events (``entity_id`` is indexed)
            covered = col(AuditRecord.payload)[(COVERS, grading.id)].as_string()
            concerning.append(
                and_(
                    col(AuditRecord.entity_type) == "regrade_job",
                    col(AuditRecord.entity_id) == grading.regrade_job_id,
                    covered.is_not(None),
                )
            )
        query = select(AuditRecord).where(or_(*concerning)).order_by(col(AuditRecord.seq))
        return list(session.execute(query).scalars())
