"""Attempts: how often a token submitted against one registered scenario.

A submitter's attempts on a scenario are its submissions whose ground truth came from
that scenario (an inline ground truth is the submitter's own, not an attempt at a
hidden one). The service limits them per hour (``api.service.attempts``) and reports
them to admins; both count the stored submissions, so every process of a deployment
counts the same.

The report is paginated by keyset over its order (most attempts first, then token and
scenario id, character by character on every database: ``storage.bytewise``): the
cursor holds the report's period (``since`` to ``until``, the moment the first page was
read) and the last pair listed, signed (``storage.cursors``), and the next page
continues strictly after it over the same period, so attempts made while a client pages
change no count and no pair is listed twice or skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.bytewise import bytewise
from storage.canonical import iso_utc
from storage.cursors import CursorCodec
from storage.database import Database, hold_named_lock
from storage.errors import InvalidCursor
from storage.tables import SubmissionRecord, TokenRecord

__all__ = [
    "MAX_PAGE",
    "AttemptCount",
    "AttemptCursor",
    "AttemptPage",
    "AttemptReads",
    "is_replay_in",
    "lock_attempts",
    "made_at_in",
    "recent_in",
    "recent_query",
]


@dataclass(frozen=True, slots=True)
class AttemptCount:
    """One token's attempts on one scenario within a report's period."""

    token_id: str
    #: the token's name and role (None for a token since deleted)
    token_name: str | None
    role: str | None
    scenario_id: str
    attempts: int
    first_at: datetime
    last_at: datetime


#: the most (token, scenario) pairs one page of the report holds
MAX_PAGE = 5000
_REFUSED = "the cursor is not one this service issued"


@dataclass(frozen=True, slots=True)
class AttemptCursor:
    """Where a page of the report continues: its period and the last pair listed."""

    since: datetime
    until: datetime
    attempts: int
    token_id: str
    scenario_id: str


@dataclass(frozen=True, slots=True)
class AttemptPage:
    """A page of the report, and the cursor of the next (None on the last)."""

    items: list[AttemptCount]
    next_cursor: str | None


def _attempts_of(token_id: str | None, scenario_id: str | None, since: datetime) -> list[object]:
    """The conditions of a token's (or every token's) attempts since ``since``."""
    conditions: list[object] = [
        col(SubmissionRecord.ground_truth_source) == "scenario",
        col(SubmissionRecord.scenario_id).is_not(None),
        col(SubmissionRecord.created_at) >= since,
    ]
    if token_id is not None:
        conditions.append(col(SubmissionRecord.submitted_by) == token_id)
    if scenario_id is not None:
        conditions.append(col(SubmissionRecord.scenario_id) == scenario_id)
    return conditions


def recent_query(token_id: str, scenario_id: str, since: datetime) -> Select[int]:
    """The count of ``token_id``'s attempts on ``scenario_id`` made at or after ``since``
    (a range of ``ix_submission_attempts``)."""
    return select(func.count()).where(
        *_attempts_of(token_id, scenario_id, since)  # type: ignore[arg-type]
    )


def recent_in(session: Session, token_id: str, scenario_id: str, since: datetime) -> int:
    """How many attempts ``token_id`` made on ``scenario_id`` at or after ``since``, in
    the caller's transaction."""
    return int(session.execute(recent_query(token_id, scenario_id, since)).scalar_one())


def made_at_in(
    session: Session, token_id: str, scenario_id: str, since: datetime, index: int
) -> datetime | None:
    """When the ``index``-th (from 0, oldest first) of ``token_id``'s attempts on
    ``scenario_id`` made at or after ``since`` was made, in the caller's transaction;
    None when there are not that many. With ``count`` attempts in a window and a limit
    of ``limit``, the one at ``count - limit`` is the last that must leave the window
    before one more attempt fits."""
    query = (
        select(col(SubmissionRecord.created_at))
        .where(*_attempts_of(token_id, scenario_id, since))  # type: ignore[arg-type]
        .order_by(col(SubmissionRecord.created_at))
        .offset(index)
        .limit(1)
    )
    return session.execute(query).scalar_one_or_none()


def is_replay_in(session: Session, token_id: str, idempotency_key: str) -> bool:
    """Whether ``token_id`` already stored a submission under ``idempotency_key``
    (sending it again replays that submission: no new attempt), in the caller's
    transaction."""
    query = select(col(SubmissionRecord.id)).where(
        col(SubmissionRecord.submitted_by) == token_id,
        col(SubmissionRecord.idempotency_key) == idempotency_key,
    )
    return session.execute(query.limit(1)).first() is not None


def lock_attempts(session: Session, token_id: str, scenario_id: str) -> None:
    """Hold the lock of ``token_id``'s attempts on ``scenario_id`` until the caller's
    transaction ends, so that the token's submissions to the scenario count its attempts
    one after another: a transaction-scoped advisory lock on PostgreSQL (no row needed:
    a principal may have no token row); on SQLite the write transaction holds the
    database's one write lock already."""
    hold_named_lock(session, "attempts", token_id, scenario_id)


class AttemptReads:
    """Counts of submissions against registered scenarios, per token and scenario."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        self._cursors = CursorCodec(db.key, "attempts")

    def read_cursor(self, cursor: str) -> AttemptCursor:
        """The period and position a cursor of the report holds; InvalidCursor unless
        this service signed it."""
        match self._cursors.decode(cursor):
            case [str(since), str(until), int(count), str(token_id), str(scenario_id)]:
                try:
                    start, end = datetime.fromisoformat(since), datetime.fromisoformat(until)
                except ValueError as exc:
                    raise InvalidCursor(_REFUSED) from exc
                if start.utcoffset() is not None and end.utcoffset() is not None:
                    return AttemptCursor(start, end, count, token_id, scenario_id)
        raise InvalidCursor(_REFUSED)

    async def per_token(
        self,
        since: datetime,
        *,
        until: datetime,
        scenario_id: str | None = None,
        after: AttemptCursor | None = None,
        limit: int | None = None,
    ) -> AttemptPage:
        """A page of every token's attempts per scenario made from ``since`` up to
        ``until``, most attempts first (then by token and scenario id): the pairs after
        ``after`` (a cursor of this period, :meth:`read_cursor`), at most ``limit`` (at
        most, and by default, :data:`MAX_PAGE`)."""
        size = max(1, min(limit or MAX_PAGE, MAX_PAGE))
        submission = SubmissionRecord.__table__  # type: ignore[attr-defined]
        token = TokenRecord.__table__  # type: ignore[attr-defined]
        count = func.count()
        attempts = count.label("attempts")
        by_token, by_scenario = submission.c.submitted_by, submission.c.scenario_id
        query = (
            select(
                submission.c.submitted_by,
                token.c.name,
                token.c.role,
                submission.c.scenario_id,
                attempts,
                func.min(submission.c.created_at),
                func.max(submission.c.created_at),
            )
            .select_from(submission.outerjoin(token, token.c.id == submission.c.submitted_by))
            .where(
                *_attempts_of(None, scenario_id, since),  # type: ignore[arg-type]
                submission.c.created_at <= until,
            )
            .group_by(by_token, token.c.name, token.c.role, by_scenario)
            .order_by(attempts.desc(), bytewise(by_token), bytewise(by_scenario))
            .limit(size + 1)
        )
        if after is not None:
            query = query.having(
                or_(
                    count < after.attempts,
                    and_(
                        count == after.attempts,
                        or_(
                            bytewise(by_token) > after.token_id,
                            and_(
                                by_token == after.token_id,
                                bytewise(by_scenario) > after.scenario_id,
                            ),
                        ),
                    ),
                )
            )
        rows = await self._db.run_read(lambda session: session.execute(query).all())
        items = [
            AttemptCount(
                token_id=row[0],
                token_name=row[1],
                role=row[2],
                scenario_id=row[3],
                attempts=int(row[4]),
                first_at=row[5],
                last_at=row[6],
            )
            for row in rows[:size]
        ]
        cursor = None
        if len(rows) > size:
            last = items[-1]
            cursor = self._cursors.encode(
                [iso_utc(since), iso_utc(until), last.attempts, last.token_id, last.scenario_id]
            )
        return AttemptPage(items=items, next_cursor=cursor)
