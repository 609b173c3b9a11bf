"""Writing what a worker brings back, in the queue's transaction: leases, calls, rows.

:class:`storage.queue.QueueRepository` stores verdicts and deferrals with these; each
function works in the caller's session and commits nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, func, insert, select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.calls import JudgeCall
from judge.verdict import GradingResult
from storage.audit.records import RecordRow
from storage.database import Database
from storage.records import call_audit_payload, judge_call_rows
from storage.tables import GradingRecord, JudgeCallRecord

_CALLS = JudgeCallRecord.__table__  # type: ignore[attr-defined]

__all__ = [
    "call_events",
    "call_records",
    "calls_before",
    "completion_payload",
    "insert_rows",
    "leased",
    "store_calls",
]


def leased(db: Database, session: Session, grading_id: str, worker_id: str) -> GradingRecord | None:
    """The grading, row-locked, if it is pending and leased to ``worker_id``."""
    query = select(GradingRecord).where(col(GradingRecord.id) == grading_id)
    if db.postgres:
        query = query.with_for_update()
    grading = session.execute(query).scalar_one_or_none()
    if grading is None or grading.status != "pending" or grading.lease_owner != worker_id:
        return None
    return grading


def store_calls(
    session: Session,
    grading: GradingRecord,
    calls: Sequence[JudgeCall],
    at: datetime,
) -> list[dict[str, Any]]:
    """Add the judge calls after those of earlier claims of the grading; their rows."""
    if not calls:
        return []
    first = 0
    if grading.claim_count > 1:  # only an earlier claim (deferred) can have stored calls
        first = calls_before(session, [grading.id]).get(grading.id, 0)
    rows = judge_call_rows(grading.id, calls, first_position=first, at=at)
    insert_rows(session, _CALLS, rows)
    return rows


def calls_before(session: Session, grading_ids: Sequence[str]) -> dict[str, int]:
    """How many judge calls each of the gradings has stored (by earlier, deferred claims);
    one query, none for an empty list; gradings without calls are left out."""
    if not grading_ids:
        return {}
    query = (
        select(col(JudgeCallRecord.grading_id), func.count())
        .where(col(JudgeCallRecord.grading_id).in_(grading_ids))
        .group_by(col(JudgeCallRecord.grading_id))
    )
    return {grading_id: count for grading_id, count in session.execute(query)}


def insert_rows(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows of one table with one executemany, not one ORM INSERT per row.

    For rows nothing reads back in the transaction (answers, votes); their integer
    ids are the database's.
    """
    if rows:
        session.connection().execute(insert(table), rows)


def call_events(
    grading_id: str, worker_id: str, calls: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One ``judge.call`` audit event per stored call, for ``Database.audit_many``."""
    return [
        {
            "event": "judge.call",
            "entity_type": "grading",
            "entity_id": grading_id,
            "actor": worker_id,
            "payload": call_audit_payload(row),
        }
        for row in calls
    ]


def call_records(
    calls: Sequence[Mapping[str, Any]], *, first_event: int
) -> dict[int, list[RecordRow]]:
    """The judge-call rows each ``call_events`` event covers (``Database.audit_many``'s
    ``rows``), the first event at index ``first_event``."""
    return {first_event + offset: [(_CALLS, row)] for offset, row in enumerate(calls)}


def completion_payload(
    grading: Mapping[str, Any], result: GradingResult, calls: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The audit payload of a stored verdict (graded or unscored); ``grading``: the
    row's values as written."""
    return {
        "grading_id": grading["id"],
        "submission_id": grading["submission_id"],
        "status": grading["status"],
        "unscored_reason": grading["unscored_reason"],
        "yes_count": grading["yes_count"],
        "composite": grading["composite"],
        "passed": grading["passed"],
        "judge_passed": grading["judge_passed"],
        "needs_review": grading["needs_review"],
        "review_reasons": grading["review_reasons"],
        "rubric": {"id": grading["rubric_id"], "version": grading["rubric_version"]},
        "judge": {"backend": result.judge_backend, "model": result.judge_model},
        "judge_calls": [c["id"] for c in calls],
        "revision": grading["revision"],
    }
