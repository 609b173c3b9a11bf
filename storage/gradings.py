"""Reading gradings: one, a filtered page, their judge calls and their history.

The list of gradings is ordered newest first by :class:`ListPosition`, ``(listed_at,
submission_id, id)``, and paginated by keyset: the cursor holds the last row's
position, signed (``storage.cursors``), and the next page continues strictly after it.
A grading is listed at its creation time, and a promoted regrade item at the place of
the grading it replaced (``listed_at``); a submission has one current grading, so in
the list of current gradings a submission's place is ``(listed_at, submission_id)``,
which a promotion leaves as it was (the grading's own id only orders the gradings of
one submission where superseded and shadow ones are listed too). New gradings are newer
than every listed one and a promotion moves no submission, so inserts and promotions
between pages never shift, duplicate or skip rows of later pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, Self, TypeVar

from sqlalchemy import ColumnElement, Select, UnaryExpression, and_, exists, or_, select, tuple_
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.spec import PANEL_PREFIX, panel_spec_pattern
from storage.audit.state import COVERS
from storage.canonical import iso_utc
from storage.cursors import CursorCodec, continues
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
    "ListPosition",
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
#: what an issued cursor can hold: ids of gradings and submissions, and a time both
#: databases store
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NOT_ISSUED = "the cursor is not one this service issued"
_EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
_LATEST = datetime(9000, 1, 1, tzinfo=UTC)


def grading_position(position: Sequence[Any]) -> tuple[datetime, str]:
    """The ``(time, id)`` a signed cursor's position holds (``[stamp, id]``: a grading's
    time in its list's order and its id); raises InvalidCursor for anything else."""
    try:
        stamp, grading_id = position
    except (ValueError, TypeError) as exc:
        raise InvalidCursor(_NOT_ISSUED) from exc
    return _issued_time(stamp), _issued_id(grading_id)


# a signed position that fails these checks was signed with our key, so they are never
# reached unless the key leaked: nothing else in it reaches a query


def _issued_time(stamp: Any) -> datetime:
    """The time a signed position holds: aware, and when a grading could be made."""
    try:
        at = datetime.fromisoformat(stamp)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor(_NOT_ISSUED) from exc
    if at.utcoffset() is None or not _EARLIEST <= at <= _LATEST:
        raise InvalidCursor(_NOT_ISSUED)
    return at


def _issued_id(value: Any) -> str:
    """An id (of a grading or a submission) a signed position holds."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidCursor(_NOT_ISSUED)
    return value


@dataclass(frozen=True)
class ListPosition:
    """A grading's place in the list of gradings, newest first: its ``listed_at``, then
    its submission's id, then its own id.

    A submission has one current grading, and a promoted one takes the ``listed_at`` of
    the grading it replaced (``storage.regrade.lifecycle``): in the list of current
    gradings ``(listed_at, submission_id)`` is a submission's place, the same before
    and after a promotion. Where superseded and shadow gradings are listed too, several
    gradings share it and their ids order them."""

    listed_at: datetime
    submission_id: str
    grading_id: str

    @classmethod
    def of(cls, grading: GradingRecord) -> ListPosition:
        """The place of ``grading``."""
        return cls(grading.listed_at, grading.submission_id, grading.id)

    @staticmethod
    def order() -> tuple[UnaryExpression[Any], ...]:
        """The list's order, newest first (``ix_grading_list_order`` read backwards)."""
        g = GradingRecord
        return (
            col(g.listed_at).desc(),
            col(g.submission_id).desc(),
            col(g.id).desc(),
        )

    def after(self, *, current_only: bool) -> ColumnElement[bool]:
        """The gradings listed after this place: past the submission in the list of
        current gradings (the grading that replaces the one at this place is not listed
        again), past the grading where every grading is listed."""
        g = GradingRecord
        # a row value (the columns' own types bind the values): both databases read it
        # as a range of ``ix_grading_list_order``
        if current_only:
            place = tuple_(col(g.listed_at), col(g.submission_id))
            return place < (self.listed_at, self.submission_id)
        place = tuple_(col(g.listed_at), col(g.submission_id), col(g.id))
        return place < (self.listed_at, self.submission_id, self.grading_id)

    def cursor(self, codec: CursorCodec) -> str:
        """The signed cursor of the page after this place."""
        return codec.encode([iso_utc(self.listed_at), self.submission_id, self.grading_id])

    @classmethod
    def of_cursor(cls, codec: CursorCodec, cursor: str) -> ListPosition:
        """The place a cursor ``codec`` signed holds; raises InvalidCursor, also for a
        cursor issued when the list was ordered by ``(listed_at, id)`` alone (a client
        starts again from the first page)."""
        position = codec.decode(cursor)
        if len(position) == 2:
            raise InvalidCursor(
                "the cursor was issued by an earlier version of the service: "
                "start again from the first page"
            )
        if len(position) != 3:
            raise InvalidCursor(_NOT_ISSUED)
        stamp, submission_id, grading_id = position
        return cls(_issued_time(stamp), _issued_id(submission_id), _issued_id(grading_id))


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
        filters = filters or GradingFilter()
        query = _filtered(
            select(GradingRecord, SubmissionRecord).join(
                SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id)
            ),
            filters,
            own_truth,
        )
        if submitted_by is not None:
            query = query.where(col(SubmissionRecord.submitted_by) == submitted_by)
        if continues(after):
            position = ListPosition.of_cursor(self._cursors, after)
            query = query.where(position.after(current_only=filters.current_only))
        query = query.order_by(*ListPosition.order()).limit(limit + 1)
        views = self._pairs_of(session, query)
        more = len(views) > limit
        views = views[:limit]
        last = views[-1].grading if views else None
        cursor = ListPosition.of(last).cursor(self._cursors) if more and last else None
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
