"""The outbox: deliveries written in the transaction of the event they announce.

:func:`enqueue` runs inside :meth:`storage.database.Database.audit`, so every audited
change that an endpoint subscribed to leaves one delivery row per endpoint in the same
transaction: committed together, or rolled back together. Payloads carry ids and
verdicts only: never a diagnosis, a ground truth, evidence or a judge's reasoning.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlmodel import col

from storage.canonical import iso_utc
from storage.tables import GradingRecord, SubmissionRecord, new_id
from storage.webhooks.tables import WebhookDeliveryRecord, WebhookEndpointRecord

__all__ = ["EVENTS", "enqueue", "webhook_event"]

#: the events an endpoint may subscribe to
EVENTS = ("grading.completed", "grading.overridden", "regrade.finished")
#: audit event -> webhook event
_FROM_AUDIT = {
    "grading.completed": "grading.completed",
    "grading.unscored": "grading.completed",
    "grading.overridden": "grading.overridden",
    "regrade_job.done": "regrade.finished",
    "regrade_job.failed": "regrade.finished",
}
_DELIVERIES = WebhookDeliveryRecord.__table__  # type: ignore[attr-defined]
#: the grading's columns a payload may carry: ids and verdicts
_GRADING_FIELDS = (
    "status", "unscored_reason", "passed", "held", "judge_passed", "yes_count", "composite",
    "needs_review", "overridden", "rubric_id", "rubric_version", "regrade_job_id",
)  # fmt: skip
_SUBMISSION_FIELDS = ("scenario_id", "agent", "model", "run_id", "attempt")


def webhook_event(audit_event: str) -> str | None:
    """The webhook event an audit event announces, if any."""
    return _FROM_AUDIT.get(audit_event)


async def _grading_data(session: AsyncSession, grading_id: str) -> dict[str, Any]:
    row = (
        await session.execute(
            select(GradingRecord, SubmissionRecord)
            .join(SubmissionRecord, col(SubmissionRecord.id) == col(GradingRecord.submission_id))
            .where(col(GradingRecord.id) == grading_id)
        )
    ).first()
    if row is None:  # pragma: no cover - audited in the grading's own transaction
        return {"grading_id": grading_id}
    grading, submission = row
    data: dict[str, Any] = {"grading_id": grading.id, "submission_id": submission.id}
    data.update({name: getattr(grading, name, None) for name in _GRADING_FIELDS})
    data.update({name: getattr(submission, name) for name in _SUBMISSION_FIELDS})
    return data


async def _data(
    session: AsyncSession, audit_event: str, entity_id: str, payload: dict[str, Any]
) -> dict[str, Any]:
    if audit_event.startswith("regrade_job."):
        return {
            "regrade_job_id": entity_id,
            "state": payload.get("state"),
            "counts": payload.get("counts", {}),
        }
    data = await _grading_data(session, entity_id)
    if audit_event == "grading.overridden":
        data["override_id"] = payload.get("override_id") or payload.get("id")
    return data


async def enqueue(
    session: AsyncSession,
    *,
    audit_event: str,
    entity_id: str,
    payload: dict[str, Any],
    at: datetime,
) -> int:
    """Write one delivery per active endpoint subscribed to this event; how many."""
    event = webhook_event(audit_event)
    if event is None:
        return 0
    endpoints = (
        await session.execute(
            select(WebhookEndpointRecord.id, WebhookEndpointRecord.events).where(
                col(WebhookEndpointRecord.active).is_(True)
            )
        )
    ).all()
    targets = [endpoint_id for endpoint_id, events in endpoints if event in (events or [])]
    if not targets:
        return 0
    body = {
        "type": event,
        "timestamp": iso_utc(at),
        "data": await _data(session, audit_event, entity_id, payload),
    }
    rows = [
        {
            "id": f"msg_{new_id()}",
            "endpoint_id": endpoint_id,
            "event": event,
            "payload": body,
            "state": "pending",
            "attempts": 0,
            "next_attempt_at": at,
            "created_at": at,
        }
        for endpoint_id in targets
    ]
    await session.execute(insert(_DELIVERIES), rows)
    return len(rows)
