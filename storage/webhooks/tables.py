"""Tables of webhooks: endpoints, the outbox of deliveries, and each delivery attempt.

An endpoint carries its circuit breaker (failures in a row, open until when), shared by
every process that delivers.

A delivery row is written in the transaction of the event it announces (see
:func:`api.webhooks.outbox.enqueue`, a subscriber of the audit), so an event is never
lost and never announced for a change that rolled back. ``seq`` orders deliveries as
their events happened.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Index, Integer, String, Text
from sqlmodel import Field, SQLModel

from storage.tables import _created, _json, _when, new_id

__all__ = ["WebhookAttemptRecord", "WebhookDeliveryRecord", "WebhookEndpointRecord"]


class WebhookEndpointRecord(SQLModel, table=True):
    """A registered receiver: its URL, the events it wants, its signing secret."""

    __tablename__ = "webhook_endpoint"

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    url: str = Field(sa_type=Text)
    events: list[str] = _json(list)
    description: str = Field(default="", sa_type=String(500))
    #: ``whsec_<base64 key>``: the Standard Webhooks secret, shown to the admin once
    secret: str = Field(sa_type=String(128))
    active: bool = True
    created_by: str = Field(sa_type=String(64))
    created_at: datetime = _created()
    #: failed attempts in a row, over all its deliveries (a 2xx sets it back to 0)
    consecutive_failures: int = 0
    #: the circuit breaker: while in the future, none of its deliveries is attempted
    circuit_open_until: datetime | None = _when()


class WebhookDeliveryRecord(SQLModel, table=True):
    """One event for one endpoint: the outbox row, then its delivery state."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (Index("ix_webhook_delivery_due", "state", "next_attempt_at"),)

    seq: int | None = Field(
        default=None, primary_key=True, sa_type=BigInteger().with_variant(Integer, "sqlite")
    )
    #: the ``webhook-id`` header: the same on every attempt, so receivers deduplicate
    id: str = Field(default_factory=lambda: f"msg_{new_id()}", sa_type=String(40), unique=True)
    endpoint_id: str = Field(
        sa_type=String(32), foreign_key="webhook_endpoint.id", index=True, ondelete="CASCADE"
    )
    event: str = Field(sa_type=String(64))
    #: the JSON body, ids and verdicts only
    payload: dict[str, Any] = _json(dict)
    #: pending | delivered | dead
    state: str = Field(default="pending", sa_type=String(16))
    attempts: int = 0
    #: the first attempt of its current series (None before it, and again once
    #: redelivered): a failing delivery is given up SRE_JUDGE_WEBHOOK_GIVE_UP_SECONDS
    #: after it, however long it waited behind the endpoint's earlier events
    first_attempt_at: datetime | None = _when()
    next_attempt_at: datetime | None = _when()
    #: while a server sends it: the end of its lease (None once the attempt is recorded);
    #: an endpoint with a delivery under a lease is not due, so it gets one send at a time
    leased_until: datetime | None = _when()
    delivered_at: datetime | None = _when()
    last_status: int | None = None
    last_error: str | None = Field(default=None, sa_type=String(500))
    created_at: datetime = _created()


class WebhookAttemptRecord(SQLModel, table=True):
    """One try at a delivery: when, the answer's status or the error, how long it took."""

    __tablename__ = "webhook_attempt"

    id: int | None = Field(
        default=None, primary_key=True, sa_type=BigInteger().with_variant(Integer, "sqlite")
    )
    delivery_seq: int = Field(
        sa_type=BigInteger().with_variant(Integer, "sqlite"),
        foreign_key="webhook_delivery.seq",
        index=True,
        ondelete="CASCADE",
    )
    attempted_at: datetime = _created()
    status: int | None = None
    error: str | None = Field(default=None, sa_type=String(500))
    duration_ms: float = 0.0
