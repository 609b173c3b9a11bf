"""The webhooks' HTTP routes (admin): register, list, their deliveries, redeliver.

Thin controllers: path, guards and one use case of :mod:`api.webhooks.use_cases` each.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from api.http.auth import require
from api.service.principal import Principal
from api.service.services import Services
from api.webhooks import use_cases
from api.webhooks.queries import MAX_PAGE
from api.webhooks.use_cases import DeliveryPage, WebhookCreate, WebhookPublic

__all__ = ["create_webhook", "list_deliveries", "list_webhooks", "redeliver"]


@post("/v1/webhooks", guards=[require("admin")], operation_id="createWebhook", status_code=201)
async def create_webhook(
    data: JSONBody[WebhookCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> WebhookPublic:
    """Register an endpoint; the answer carries its signing ``secret``, this once only."""
    return await use_cases.register_webhook(services, principal, data)


@get("/v1/webhooks", guards=[require("admin")], operation_id="listWebhooks")
async def list_webhooks(services: NamedDependency[Services]) -> dict[str, list[WebhookPublic]]:
    """Every endpoint (without secrets)."""
    return {"items": await use_cases.list_webhooks(services)}


@get(
    "/v1/webhooks/{webhook_id:str}/deliveries",
    guards=[require("admin")],
    operation_id="listWebhookDeliveries",
)
async def list_deliveries(
    webhook_id: FromPath[str],
    services: NamedDependency[Services],
    delivery_state: Annotated[
        Literal["pending", "delivered", "dead"] | None, QueryParameter(name="state")
    ] = None,
    cursor: FromQuery[str | None] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 100,
) -> DeliveryPage:
    """An endpoint's deliveries, newest first, each with its attempts; ``limit`` a page,
    ``next_cursor`` (null on the last page) passed back as ``cursor`` for the next. A
    cursor this service did not sign for this endpoint is a 400 naming ``cursor``."""
    return await use_cases.list_deliveries(
        services, webhook_id, state=delivery_state, cursor=cursor, limit=limit
    )


@post(
    "/v1/webhooks/{webhook_id:str}/deliveries/{delivery_id:str}/redeliver",
    guards=[require("admin")],
    operation_id="redeliverWebhook",
    status_code=202,
)
async def redeliver(
    webhook_id: FromPath[str],
    delivery_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Send a delivery again (a dead-lettered one too), in its place in the event order."""
    await use_cases.redeliver(services, principal, webhook_id, delivery_id)
    return {"id": delivery_id, "state": "pending"}
