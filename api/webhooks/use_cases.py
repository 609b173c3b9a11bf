"""The webhooks' use cases: registering an endpoint (with the target check), listing
endpoints and deliveries, redelivering.

A target must be an ``http(s)`` URL whose host resolves to public addresses only (see
:mod:`api.webhooks.target`), unless the host is listed in
``SRE_JUDGE_WEBHOOK_ALLOW_HOSTS``. The delivery worker checks again at each send, and
sends to the address it checked.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.service.principal import Principal
from api.service.services import Services
from api.service.settings import mask_passwords
from api.webhooks.outbox import EVENTS
from api.webhooks.queries import DeliveryView, WebhookQueries
from api.webhooks.target import allowed_hosts, resolve_target
from storage.webhooks.tables import WebhookEndpointRecord

__all__ = [
    "AttemptPublic",
    "DeliveryPage",
    "DeliveryPublic",
    "WebhookCreate",
    "WebhookPublic",
    "delivery_public",
    "list_deliveries",
    "list_webhooks",
    "redeliver",
    "register_webhook",
    "webhook_public",
]

EventName = Literal[
    "grading.completed", "grading.overridden", "regrade.finished", "judge.changed", "judge.demoted"
]
assert set(EventName.__args__) == set(EVENTS)  # type: ignore[attr-defined]


class WebhookCreate(BaseModel):
    """An endpoint to register."""

    model_config = ConfigDict(extra="forbid")

    url: StrictStr = Field(min_length=8, max_length=2000)
    events: list[EventName] = Field(min_length=1, max_length=len(EVENTS))
    description: StrictStr = Field(default="", max_length=500)


class WebhookPublic(BaseModel):
    """A registered endpoint; ``secret`` only in the answer that created it."""

    id: str
    url: str
    events: list[str]
    description: str
    active: bool
    created_at: datetime
    #: failed attempts in a row, over all of its deliveries
    consecutive_failures: int = 0
    #: while in the future, the circuit is open: none of its deliveries is attempted
    circuit_open_until: datetime | None = None
    secret: str | None = None


class AttemptPublic(BaseModel):
    """One try at a delivery."""

    attempted_at: datetime
    status: int | None
    error: str | None
    duration_ms: float


class DeliveryPublic(BaseModel):
    """One event sent (or to send) to one endpoint, with its attempts."""

    id: str
    event: str
    state: Literal["pending", "delivered", "dead"]
    payload: dict[str, Any]
    attempts: list[AttemptPublic]
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    created_at: datetime


class DeliveryPage(BaseModel):
    """A page of an endpoint's deliveries, newest first; pass ``next_cursor`` back as
    ``cursor`` for the next (null on the last page)."""

    items: list[DeliveryPublic]
    next_cursor: str | None = None


def webhook_public(record: WebhookEndpointRecord, *, with_secret: bool = False) -> WebhookPublic:
    """The API view of an endpoint: its URL as sent in the answer that created it, else
    with its credentials (a password, a token in the query) masked, as the secret is."""
    return WebhookPublic(
        id=record.id,
        url=record.url if with_secret else mask_passwords(record.url),
        events=list(record.events),
        description=record.description,
        active=record.active,
        created_at=record.created_at,
        consecutive_failures=record.consecutive_failures,
        circuit_open_until=record.circuit_open_until,
        secret=record.secret if with_secret else None,
    )


def delivery_public(view: DeliveryView) -> DeliveryPublic:
    """The API view of a delivery."""
    d = view.delivery
    return DeliveryPublic(
        id=d.id,
        event=d.event,
        state=d.state,  # type: ignore[arg-type]
        payload=d.payload,
        attempts=[
            AttemptPublic(
                attempted_at=a.attempted_at,
                status=a.status,
                error=a.error,
                duration_ms=a.duration_ms,
            )
            for a in view.attempts
        ],
        next_attempt_at=d.next_attempt_at if d.state == "pending" else None,
        delivered_at=d.delivered_at,
        created_at=d.created_at,
    )


async def register_webhook(
    services: Services, principal: Principal, data: WebhookCreate
) -> WebhookPublic:
    """Check the target and register the endpoint; the answer carries its secret, once."""
    await resolve_target(data.url, allowed_hosts(services.settings.webhook_allow_hosts))
    record = await WebhookQueries(services.store.db).create_endpoint(
        url=data.url, events=list(dict.fromkeys(data.events)), description=data.description,
        actor=principal.id,
    )  # fmt: skip
    return webhook_public(record, with_secret=True)


async def list_webhooks(services: Services) -> list[WebhookPublic]:
    """Every endpoint (without secrets)."""
    return [webhook_public(r) for r in await WebhookQueries(services.store.db).endpoints()]


async def list_deliveries(
    services: Services, webhook_id: str, *, state: str | None, cursor: str | None, limit: int
) -> DeliveryPage:
    """A page of an endpoint's deliveries, newest first, each with its attempts."""
    page = await WebhookQueries(services.store.db).delivery_page(
        webhook_id, state=state, cursor=cursor, limit=limit
    )
    return DeliveryPage(
        items=[delivery_public(v) for v in page.items], next_cursor=page.next_cursor
    )


async def redeliver(
    services: Services, principal: Principal, webhook_id: str, delivery_id: str
) -> None:
    """Put a delivery (a dead-lettered one too) back in its place in the event order."""
    await WebhookQueries(services.store.db).redeliver(webhook_id, delivery_id, actor=principal.id)
