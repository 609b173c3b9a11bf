"""The outbox: deliveries written in the transaction of the event they announce.

:func:`subscribe` makes :func:`enqueue` a subscriber of a database's audit
(:meth:`storage.database.Database.subscribe`): it runs inside every audited transaction,
so every audited change that an endpoint subscribed to leaves one delivery row per
endpoint in the same transaction: committed together, or rolled back together. The app
wiring subscribes each store it opens (the runtime's, the command line's). Payloads
carry ids and verdicts only: never a diagnosis, a ground truth, evidence or a judge's
reasoning.

The active endpoints are read once and then kept per engine for as long as the audit
chain proves them unchanged (:func:`storage.audit.last_append`): an endpoint changes only
in a transaction that audits a ``webhook.*`` event, so while each append of this engine
links to the head its previous append ended at, no other process, engine or rolled-back
transaction wrote in between, and the list kept is still the table's. Any other append
between them (another process's, on SQLite or PostgreSQL alike), a ``webhook.*`` event,
or a transaction that rolled back, and the list is read again. On a quiet service a
grading's verdict reads no endpoint at all. (A row of ``webhook_endpoint`` edited by
hand, outside the service, is seen after the next restart or append of another process.)

:func:`on_committed` lets this process's delivery worker hear, once a transaction that
wrote deliveries has committed, that there is something to send: it starts at once
instead of at its next poll (which still finds what other processes wrote).

A delivery describes its grading as the transaction commits it: when a later event of
the same transaction changes a grading it already announced (a regrade item's verdict,
then the carry of its overrides, which may flag it ``override_outdated`` while
announcing nothing itself), the deliveries written before are rewritten with the
grading as it then stands, before the commit (:func:`_retell`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import bindparam, event, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.audit import last_append
from storage.canonical import iso_utc
from storage.database import Database
from storage.tables import GradingRecord, SubmissionRecord, new_id
from storage.webhooks.tables import WebhookDeliveryRecord, WebhookEndpointRecord

__all__ = ["EVENTS", "enqueue", "on_committed", "subscribe", "webhook_event"]

#: the events an endpoint may subscribe to
EVENTS = (
    "grading.completed",
    "grading.overridden",
    "regrade.finished",
    "judge.changed",
    "judge.demoted",
)
#: audit event -> webhook event
_FROM_AUDIT = {
    "grading.completed": "grading.completed",
    "grading.unscored": "grading.completed",
    "grading.overridden": "grading.overridden",
    "regrade_job.done": "regrade.finished",
    "regrade_job.failed": "regrade.finished",
    # a cancelled job has ended (it may be resumed: then it finishes again, another event)
    "regrade_job.cancelled": "regrade.finished",
    "judge.changed": "judge.changed",
    "judge.demoted": "judge.demoted",
}
#: a regrade's copy of the overrides in force onto its grading (``storage.regrade``)
_CARRIED = "grading.overrides_carried"
_DELIVERIES = WebhookDeliveryRecord.__table__  # type: ignore[attr-defined]
#: one delivery's payload rewritten (:func:`_retell`)
_RETELL = (
    update(_DELIVERIES)
    .where(_DELIVERIES.c.id == bindparam("b_id"))
    .values(payload=bindparam("b_payload", type_=_DELIVERIES.c.payload.type))
)
#: ``session.info`` key: the grading deliveries of the session's transaction (:func:`_told`)
_TOLD = "webhooks.told"
#: the grading's columns a payload may carry: ids and verdicts
_GRADING_FIELDS = (
    "status", "unscored_reason", "passed", "held", "judge_passed", "yes_count", "composite",
    "needs_review", "overridden", "rubric_id", "rubric_version", "regrade_job_id",
)  # fmt: skip
_SUBMISSION_FIELDS = ("scenario_id", "agent", "model", "run_id", "attempt")
_log = logging.getLogger(__name__)
#: an active endpoint as the outbox needs it: its id and the events it subscribed to
Endpoint = tuple[str, list[str]]
#: engine -> (the audit chain head the list is known to hold at, the active endpoints)
_KNOWN: WeakKeyDictionary[Engine, tuple[str, list[Endpoint]]] = WeakKeyDictionary()
#: engine -> what to call after a transaction of it that wrote deliveries commits
_LISTENERS: WeakKeyDictionary[Engine, list[Callable[[], None]]] = WeakKeyDictionary()


def on_committed(engine: Engine, listener: Callable[[], None]) -> Callable[[], None]:
    """Call ``listener`` (from the committing thread) after each transaction of
    ``engine`` in this process that wrote deliveries commits; returns what stops it."""
    listeners = _LISTENERS.setdefault(engine, [])
    listeners.append(listener)
    return lambda: listeners.remove(listener) if listener in listeners else None


def _after_commit(session: Session) -> None:
    """Tell this engine's listeners once ``session``'s transaction has committed."""
    if _LISTENERS.get(session.get_bind()):  # type: ignore[arg-type]
        event.listen(session, "after_commit", _tell, once=True)


def _tell(session: Session) -> None:
    """Call each listener of ``session``'s engine; what one raises is logged, never raised
    from a commit that succeeded (a worker stopping meanwhile finds its loop closed)."""
    for listener in list(_LISTENERS.get(session.get_bind(), ())):  # type: ignore[arg-type]
        try:
            listener()
        except Exception:
            _log.warning("a webhook worker could not be told of new deliveries", exc_info=True)


def webhook_event(audit_event: str, payload: dict[str, Any] | None = None) -> str | None:
    """The webhook event an audit event announces, if any: a regrade that carried a human's
    overrides onto its grading is that grading's ``grading.overridden`` (its verdict in
    force is the human's, which a subscriber of ``grading.overridden`` hears of too)."""
    if audit_event == _CARRIED:
        return "grading.overridden" if (payload or {}).get("carried") else None
    return _FROM_AUDIT.get(audit_event)


def _grading_data(session: Session, grading_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The payload data of each grading (ids and verdicts), read in one query."""
    rows = session.execute(
        select(GradingRecord, SubmissionRecord)
        .join(SubmissionRecord, col(SubmissionRecord.id) == col(GradingRecord.submission_id))
        .where(col(GradingRecord.id).in_(grading_ids))
    )
    found: dict[str, dict[str, Any]] = {}
    for grading, submission in rows:
        data: dict[str, Any] = {"grading_id": grading.id, "submission_id": submission.id}
        data.update({name: getattr(grading, name, None) for name in _GRADING_FIELDS})
        data.update({name: getattr(submission, name) for name in _SUBMISSION_FIELDS})
        found[grading.id] = data
    return found


@dataclass
class _Told:
    """The deliveries one audit event of a transaction wrote about a grading: their ids
    (one per endpoint) and the body they carry."""

    event: dict[str, Any]
    body: dict[str, Any]
    ids: list[str]


def _told(session: Session) -> dict[str, list[_Told]]:
    """The deliveries ``session``'s transaction wrote so far, by the grading they
    describe (empty in a new transaction)."""
    transaction = session.get_transaction()
    kept = session.info.get(_TOLD)
    if kept is None or kept[0] is not transaction:
        kept = session.info[_TOLD] = (transaction, {})
    told: dict[str, list[_Told]] = kept[1]
    return told


def _retell(session: Session, told: Sequence[_Told], gradings: dict[str, Any]) -> None:
    """Rewrite the body of each of ``told`` whose grading (as ``gradings`` read it now)
    is no longer the one it describes; one statement for all, none when none changed."""
    params: list[dict[str, Any]] = []
    for t in told:
        if t.event["entity_id"] not in gradings:
            continue
        data = _data(t.event["event"], t.event["entity_id"], t.event["payload"], gradings)
        if data != t.body["data"]:
            t.body = {**t.body, "data": data}
            params.extend({"b_id": delivery_id, "b_payload": t.body} for delivery_id in t.ids)
    if params:
        session.connection().execute(_RETELL, params)


def _data(
    audit_event: str, entity_id: str, payload: dict[str, Any], gradings: dict[str, Any]
) -> dict[str, Any]:
    if audit_event.startswith("judge."):  # names, digests and figures only
        return dict(payload)
    if audit_event.startswith("regrade_job."):
        return {
            "regrade_job_id": entity_id,
            "state": payload.get("state"),
            "counts": payload.get("counts", {}),
        }
    # audited in the grading's own transaction: the grading is there
    data = dict(gradings.get(entity_id) or {"grading_id": entity_id})
    if audit_event == "grading.overridden":
        data["override_id"] = payload.get("override_id") or payload.get("id")
    if audit_event == _CARRIED:  # the copies made here, and the grading they came from
        data["override_ids"] = list(payload.get("copies") or [])
        data["carried_from"] = payload.get("from_grading")
    return data


def enqueue(session: Session, events: Sequence[dict[str, Any]], *, at: datetime) -> int:
    """Write one delivery per active endpoint subscribed to each of the audit ``events``
    (``event``, ``entity_id``, ``payload`` each); how many.

    At most four statements whatever the number of events: the endpoints (none while
    the list kept is proven current), the gradings the payloads describe, the
    deliveries, and the rewrite of the deliveries this transaction wrote before about a
    grading one of ``events`` changes again (:func:`_retell`, when one did change);
    none when no event is one an endpoint can subscribe to or of a grading announced.
    """
    announced = [
        (e, kind) for e in events if (kind := webhook_event(e["event"], e["payload"])) is not None
    ]
    endpoints = _active_endpoints(session, events, needed=bool(announced))
    subscribed = [
        (e, kind, targets)
        for e, kind in announced
        if (targets := [i for i, kinds in endpoints or [] if kind in (kinds or [])])
    ]
    told = _told(session)
    again = {e["entity_id"] for e in events if _of_grading(e) and e["entity_id"] in told}
    grading_ids = {e["entity_id"] for e, _, _ in subscribed if _of_grading(e)} | again
    if not grading_ids and not subscribed:
        return 0
    gradings = _grading_data(session, sorted(grading_ids)) if grading_ids else {}
    _retell(session, [t for grading_id in sorted(again) for t in told[grading_id]], gradings)
    rows: list[dict[str, Any]] = []
    for e, kind, targets in subscribed:
        body = {
            "type": kind,
            "timestamp": iso_utc(at),
            "data": _data(e["event"], e["entity_id"], e["payload"], gradings),
        }
        ids = [f"msg_{new_id()}" for _ in targets]
        rows.extend(
            {
                "id": delivery_id,
                "endpoint_id": endpoint_id,
                "event": kind,
                "payload": body,
                "state": "pending",
                "attempts": 0,
                "next_attempt_at": at,
                "created_at": at,
            }
            for delivery_id, endpoint_id in zip(ids, targets, strict=True)
        )
        if _of_grading(e):
            told.setdefault(e["entity_id"], []).append(_Told(e, body, ids))
    if rows:
        session.execute(insert(_DELIVERIES), rows)
        _after_commit(session)
    return len(rows)


def _of_grading(audit_event: dict[str, Any]) -> bool:
    """Whether ``audit_event`` is a grading's (its payload describes the grading)."""
    return bool(audit_event["event"].startswith("grading."))


def _active_endpoints(
    session: Session, events: Sequence[dict[str, Any]], *, needed: bool
) -> list[Endpoint] | None:
    """The active endpoints, from the list kept for this engine when the audit chain
    proves it current, else read (only when ``needed``); what is kept moves to the head
    the transaction's append of ``events`` ended at. A list read in a transaction that
    changes an endpoint is not kept: it would hold the change before its commit."""
    engine = session.get_bind().engine  # a Connection's engine, or the Engine itself
    link = last_append(session)
    known = _KNOWN.get(engine)
    changes = any(e["event"].startswith("webhook.") for e in events)
    if known is not None and link is not None and known[0] == link.linked_to and not changes:
        endpoints: list[Endpoint] | None = known[1]
    elif needed:
        query = select(col(WebhookEndpointRecord.id), col(WebhookEndpointRecord.events)).where(
            col(WebhookEndpointRecord.active).is_(True)
        )
        endpoints = [(row.id, list(row.events or [])) for row in session.execute(query)]
    else:
        endpoints = None
    if endpoints is None or link is None or changes:  # a list read with a change unsure
        _KNOWN.pop(engine, None)
    else:
        _KNOWN[engine] = (link.head, endpoints)
    return endpoints


def subscribe(db: Database) -> None:
    """Write the outbox of every audited event of ``db``, in the event's transaction."""
    db.subscribe(enqueue)
