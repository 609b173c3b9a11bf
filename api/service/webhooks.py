"""Webhook endpoints: registering one (with the target check), listing, redelivering.

A target must be an ``http(s)`` URL whose host resolves to public addresses only:
loopback, private, link-local (the cloud metadata address among them), multicast and
reserved addresses are refused unless the host is listed in
``SRE_JUDGE_WEBHOOK_ALLOW_HOSTS``. The delivery worker checks again before each send,
so a name that later resolves elsewhere is refused too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from datetime import datetime
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.service.errors import InvalidRequest
from api.service.principal import Principal
from api.service.services import Services
from storage.webhooks.outbox import EVENTS
from storage.webhooks.repository import DeliveryView
from storage.webhooks.tables import WebhookEndpointRecord

__all__ = [
    "AttemptPublic",
    "DeliveryPublic",
    "WebhookCreate",
    "WebhookPublic",
    "check_target",
    "delivery_public",
    "register_webhook",
    "webhook_public",
]

EventName = Literal["grading.completed", "grading.overridden", "regrade.finished"]
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


def webhook_public(record: WebhookEndpointRecord, *, with_secret: bool = False) -> WebhookPublic:
    """The API view of an endpoint."""
    return WebhookPublic(
        id=record.id,
        url=record.url,
        events=list(record.events),
        description=record.description,
        active=record.active,
        created_at=record.created_at,
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


def allowed_hosts(setting: str) -> frozenset[str]:
    """The hosts of ``SRE_JUDGE_WEBHOOK_ALLOW_HOSTS``, lower case."""
    return frozenset(h.strip().lower() for h in setting.split(",") if h.strip())


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check_target(url: str, allow: frozenset[str]) -> None:
    """Refuse a URL that is not http(s) or whose host is not public (unless allowed)."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise InvalidRequest("an http:// or https:// URL with a host is needed", field="url")
    host = parts.hostname.lower()
    if host in allow:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM
        )
    except OSError as error:
        raise InvalidRequest(
            f"the host {host!r} does not resolve ({error})", field="url"
        ) from error
    refused = sorted({str(info[4][0]) for info in infos if not _public(str(info[4][0]))})
    if refused:
        raise InvalidRequest(
            f"the host {host!r} resolves to a loopback, private, link-local or reserved "
            f"address ({', '.join(refused)}); list it in SRE_JUDGE_WEBHOOK_ALLOW_HOSTS to allow it",
            field="url",
        )


async def register_webhook(
    services: Services, principal: Principal, data: WebhookCreate
) -> WebhookPublic:
    """Check the target and register the endpoint; the answer carries its secret, once."""
    await check_target(data.url, allowed_hosts(services.settings.webhook_allow_hosts))
    record = await services.store.webhooks.create_endpoint(
        url=data.url, events=list(dict.fromkeys(data.events)), description=data.description,
        actor=principal.id,
    )  # fmt: skip
    return webhook_public(record, with_secret=True)
