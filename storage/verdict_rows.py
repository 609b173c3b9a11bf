"""Writing what a worker brings back, in the queue's transaction: leases, calls, rows.

:class:`storage.queue.QueueRepository` stores verdicts and deferrals with these; each
function works in the caller's session and commits nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from judge.calls import JudgeCall
from judge.verdict import GradingResult
from storage.database import Database
from storage.records import call_audit_payload, judge_call_records
from storage.tables import GradingRecord, JudgeCallRecord, row_values

_CALLS = JudgeCallRecord.__table__  # type: ignore[attr-defined]

__all__ = ["call_events", "completion_payload", "insert_rows", "leased", "store_calls"]


async def leased(
    db: Database, session: AsyncSession, grading_id: str, worker_id: str
) -> GradingRecord | None:
    """The grading, row-locked, if it is pending and leased to ``worker_id``."""
    query = select(GradingRecord).where(col(GradingRecord.id) == grading_id)
    if db.postgres:
        query = query.with_for_update()
    grading = (await session.execute(query)).scalar_one_or_none()
    if grading is None or grading.status != "pending" or grading.lease_owner != worker_id:
        return None
    return grading


async def store_calls(
    session: AsyncSession,
    grading: GradingRecord,
    calls: Sequence[JudgeCall],
    at: datetime,
) -> list[JudgeCallRecord]:
    """Add the judge calls after those of earlier claims of the grading."""
    if not calls:
        return []
    first = 0
    if grading.claim_count > 1:  # only an earlier claim (deferred) can have stored calls
        count = select(func.count()).where(col(JudgeCallRecord.grading_id) == grading.id)
        first = (await session.execute(count)).scalar_one()
    records = judge_call_records(grading.id, calls, first_position=first, at=at)
    # one executemany of plain values, not ORM objects and a flush per row
    await session.execute(insert(_CALLS), [row_values(r) for r in records])
    return records


async def insert_rows(session: AsyncSession, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows of one table with one executemany, not one ORM INSERT per row.

    For rows nothing reads back in the transaction (answers, votes); their integer
    ids are the database's.
    """
    if rows:
        await session.execute(insert(table), rows)


def call_events(
    grading_id: str, worker_id: str, calls: list[JudgeCallRecord]
) -> list[dict[str, Any]]:
    """One ``judge.call`` audit event per stored call, for ``Database.audit_many``."""
    return [
        {
            "event": "judge.call",
            "entity_type": "grading",
            "entity_id": grading_id,
            "actor": worker_id,
            "payload": call_audit_payload(record),
        }
        for record in calls
    ]


def completion_payload(
    grading: GradingRecord, result: GradingResult, calls: list[JudgeCallRecord]
) -> dict[str, Any]:
    """The audit payload of a stored verdict (graded or unscored)."""
    return {
        "grading_id": grading.id,
        "submission_id": grading.submission_id,
        "status": grading.status,
        "unscored_reason": grading.unscored_reason,
        "yes_count": grading.yes_count,
        "composite": grading.composite,
        "passed": grading.passed,
        "judge_passed": grading.judge_passed,
        "needs_review": grading.needs_review,
        "review_reasons": grading.review_reasons,
        "rubric": {"id": grading.rubric_id, "version": grading.rubric_version},
        "judge": {"backend": result.judge_backend, "model": result.judge_model},
        "judge_calls": [c.id for c in calls],
        "revision": grading.revision,
    }
