"""The attempt limit: how often one submitter token may submit against one registered
scenario within an hour (``SRE_JUDGE_SUBMITTER_ATTEMPTS_PER_SCENARIO_PER_HOUR``), and
the admins' report of attempts per token and scenario.

Every answer a submitter gets about a hidden ground truth (the verdict, and with
``SRE_JUDGE_SUBMITTER_VIEW=answers`` the effective answers) tells it a little of that
ground truth; the limit bounds how much a token can learn by probing. An inline ground
truth is the submitter's own: not counted. Replays of a stored submission (the same
``Idempotency-Key``) are not new attempts. The count is read from the stored
submissions in the transaction that stores the new one, after taking the lock of the
token's attempts on the scenario (an advisory lock on PostgreSQL; SQLite's write
transaction holds the database's write lock), so it holds across processes and for
submissions sent at the same moment.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel
from sqlalchemy.orm import Session

from api.service.errors import ServiceError
from api.service.principal import Principal
from api.service.services import Services
from storage.attempts import is_replay_in, lock_attempts, made_at_in, recent_in
from storage.cursors import continues
from storage.errors import InvalidCursor

__all__ = [
    "ATTEMPT_WINDOW",
    "AttemptReport",
    "AttemptReportItem",
    "TooManyAttempts",
    "attempt_report",
    "check_attempts_in",
]

#: the period the limit counts attempts over
ATTEMPT_WINDOW = timedelta(hours=1)


class TooManyAttempts(ServiceError):
    """The token used up its attempts on the scenario for now; ``retry_after`` seconds
    until the first of them leaves the window."""

    title = "Too many attempts"

    def __init__(self, detail: str, *, retry_after: int) -> None:
        super().__init__(detail, field="scenario_id")
        self.retry_after = retry_after


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def check_attempts_in(
    session: Session,
    services: Services,
    principal: Principal,
    scenario_id: str,
    *,
    idempotency_key: str | None,
) -> None:
    """Raise :class:`TooManyAttempts` when ``principal`` (a submitter) made the limit's
    number of attempts on ``scenario_id`` within the last hour and this request is not
    a replay; in the transaction that stores the attempt (see the module). Adjudicators
    and admins, who may read the ground truth, are not limited."""
    limit = services.settings.submitter_attempts_per_scenario_per_hour
    if limit <= 0 or principal.at_least("adjudicator"):
        return
    lock_attempts(session, principal.id, scenario_id)
    now = services.store.db.clock()
    since = now - ATTEMPT_WINDOW
    count = recent_in(session, principal.id, scenario_id, since)
    if count < limit:
        return
    if idempotency_key is not None and is_replay_in(session, principal.id, idempotency_key):
        return
    # the wait until enough attempts left the window for one more to fit (more than the
    # first's leaving when the token holds more than the limit: a limit lowered since)
    freeing = made_at_in(session, principal.id, scenario_id, since, count - limit)
    freed_at = _aware(freeing or now) + ATTEMPT_WINDOW
    wait = max(1, math.ceil((freed_at - _aware(now)).total_seconds()))
    raise TooManyAttempts(
        f"this token made {count} attempts on scenario {scenario_id!r} within the "
        f"last hour, the limit is {limit}; nothing was stored",
        retry_after=wait,
    )


class AttemptReportItem(BaseModel):
    """One token's attempts on one scenario within the report's period."""

    token_id: str
    #: the token's name and role (null for a token no longer stored)
    token_name: str | None
    role: str | None
    scenario_id: str
    attempts: int
    first_at: datetime
    last_at: datetime


class AttemptReport(BaseModel):
    """Attempts per token and scenario from ``since`` up to ``until``, most attempts
    first; ``next_cursor`` (null on the last page) continues it over the same period."""

    since: datetime
    #: the end of the period: when the report's first page was read
    until: datetime
    #: the attempts a submitter token may make on one scenario within an hour (0: none)
    limit_per_hour: int
    items: list[AttemptReportItem]
    #: pass back as ``cursor`` for the rest of the report; null when this is all of it
    next_cursor: str | None = None


async def attempt_report(
    services: Services,
    *,
    since: datetime | None = None,
    scenario_id: str | None = None,
    cursor: str | None = None,
    limit: int | None = None,
) -> AttemptReport:
    """A page of every token's attempts per registered scenario since ``since``
    (default: the last hour, the limit's window) up to now; with ``cursor``, the next
    page over the period of the first (``since``, when given, must be that page's:
    InvalidCursor otherwise). ``limit`` pairs a page, at most and by default
    ``storage.attempts.MAX_PAGE``."""
    reads = services.store.attempts
    after = reads.read_cursor(cursor) if continues(cursor) else None
    if after is not None:
        if since is not None and _aware(since) != after.since:
            raise InvalidCursor("the cursor continues a report of another created_after")
        start, until = after.since, after.until
    else:
        until = _aware(services.store.db.clock())
        start = _aware(since) if since is not None else until - ATTEMPT_WINDOW
    page = await reads.per_token(
        start, until=until, scenario_id=scenario_id, after=after, limit=limit
    )
    return AttemptReport(
        since=start,
        until=until,
        limit_per_hour=services.settings.submitter_attempts_per_scenario_per_hour,
        next_cursor=page.next_cursor,
        items=[
            AttemptReportItem(
                token_id=c.token_id,
                token_name=c.token_name,
                role=c.role,
                scenario_id=c.scenario_id,
                attempts=c.attempts,
                first_at=_aware(c.first_at),
                last_at=_aware(c.last_at),
            )
            for c in page.items
        ],
    )
