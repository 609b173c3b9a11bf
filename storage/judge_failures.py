"""Failed judge calls that still stand, as every process reads them from the database.

A judge that lists its models may still fail every completion (a proxy in front of a
model server that is down, a model that does not fit in memory). A call that failed in a
way retrying later fixes (``judge.errors.RETRY_LATER``: unreachable, rate limited, timed
out, its key refused) defers its grading, and readiness counts that judge as not
answering while the failure is the last word on it. That word is read here, from the
calls the gradings stored, not from the memory of the process whose worker made the
call: every process of a deployment (``serve --processes N``, ``sre-judge worker`` on
other machines) then answers alike.

The calls looked at are those stored since ``since`` (the caller's window: the retry
wait and a probe's 15 s) to the judge itself: not answered from the judge cache nor from
a batch engine's kept replies, which say nothing of whether it answers now. Of the
gradings deferred since, the latest such call decides; a failure there still stands
unless a grading made since has a later call that the judge answered. A grading made
earlier and graded since is not read (no index finds it): its success clears the
failure once the gradings the failure deferred are asked again, or the window passes it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, exists, or_, select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.errors import RETRY_LATER
from storage.tables import GradingRecord, JudgeCallRecord

__all__ = ["CalledJudge", "standing_failure"]

#: a judge as its calls record it: ``(backend, model, base_url)``
CalledJudge = tuple[str, str, str | None]

_G = GradingRecord
_J = JudgeCallRecord


def _live_calls_to(
    judge: CalledJudge, *, after: datetime, inclusive: bool
) -> list[ColumnElement[bool]]:
    """Conditions on ``judge_call``: a call that reached ``judge``, stored at ``after`` or
    later (``inclusive``), else after it."""
    backend, model, base_url = judge
    stored = col(_J.created_at)
    return [
        stored >= after if inclusive else stored > after,
        col(_J.backend) == backend,
        col(_J.model) == model,
        col(_J.base_url).is_(None) if base_url is None else col(_J.base_url) == base_url,
        col(_J.cached).is_(False),
        col(_J.via).is_(None),
    ]


def standing_failure(session: Session, judge: CalledJudge, *, since: datetime) -> str | None:
    """The error code of a failed call to ``judge`` that still stands, or None.

    The latest call to it that a pending grading deferred since ``since`` stored (a
    grading deferred at a time waits until then or later: ``not_before``) failed in a
    way retrying later fixes, and no grading made since has a later call to it that did
    not. Both reads go through indexes: the pending gradings and those made since, then
    their calls.
    """
    deferred = select(col(_G.id)).where(
        col(_G.status) == "pending",
        col(_G.pending_reason).is_not(None),
        col(_G.not_before) >= since,
    )
    latest = (
        select(col(_J.error_code), col(_J.created_at))
        .where(
            col(_J.grading_id).in_(deferred), *_live_calls_to(judge, after=since, inclusive=True)
        )
        .order_by(col(_J.created_at).desc(), col(_J.position).desc())
        .limit(1)
    )
    row = session.execute(latest).first()
    if row is None or row.error_code not in RETRY_LATER:
        return None
    made_since = select(col(_G.id)).where(col(_G.created_at) >= since)
    answered = exists().where(
        col(_J.grading_id).in_(made_since),
        *_live_calls_to(judge, after=row.created_at, inclusive=False),
        or_(col(_J.error_code).is_(None), col(_J.error_code).not_in(sorted(RETRY_LATER))),
    )
    return None if session.execute(select(answered)).scalar() else str(row.error_code)
