"""Webhook endpoints and their deliveries: register, claim due deliveries, record attempts.

Claiming takes each endpoint's oldest pending delivery only, so an endpoint receives
its events in the order they happened, and leases it (``next_attempt_at`` moved past
the send's deadline) in a short transaction; on PostgreSQL with ``FOR UPDATE SKIP
LOCKED``, so several servers on one database never claim the same delivery. A server
killed mid-send leaves a lease that runs out: the delivery is sent again with the same
``webhook-id``.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlmodel import col

from storage.database import Database
from storage.errors import NotFound
from storage.webhooks.tables import (
    WebhookAttemptRecord,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
)

__all__ = ["Claimed", "DeliveryView", "WebhookRepository"]

_ATTEMPTS = WebhookAttemptRecord.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Claimed:
    """A delivery leased to this process, with what sending it needs."""

    seq: int
    id: str
    url: str
    secret: str
    payload: dict[str, Any]
    attempts: int
    created_at: datetime


@dataclass(frozen=True)
class DeliveryView:
    """A delivery with its attempts, oldest first."""

    delivery: WebhookDeliveryRecord
    attempts: list[WebhookAttemptRecord]


def _claimed(delivery: WebhookDeliveryRecord, url: str, secret: str) -> Claimed:
    return Claimed(
        seq=int(delivery.seq or 0), id=delivery.id, url=url, secret=secret,
        payload=dict(delivery.payload), attempts=delivery.attempts,
        created_at=delivery.created_at,
    )  # fmt: skip


def new_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookRepository:
    """Endpoints, the outbox's deliveries and their attempts."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_endpoint(
        self, *, url: str, events: list[str], description: str, actor: str
    ) -> WebhookEndpointRecord:
        """Register an endpoint with a fresh secret (returned once, in the record)."""
        record = WebhookEndpointRecord(
            url=url, events=events, description=description, secret=new_secret(), created_by=actor
        )
        async with self._db.write() as session:
            session.add(record)
            await session.flush()
            await self._db.audit(
                session,
                "webhook.created",
                entity_type="webhook",
                entity_id=record.id,
                actor=actor,
                payload={"url": url, "events": events},
            )
        return record

    async def endpoints(self) -> list[WebhookEndpointRecord]:
        """Every endpoint, oldest first."""
        async with self._db.read() as session:
            query = select(WebhookEndpointRecord).order_by(col(WebhookEndpointRecord.created_at))
            return list((await session.execute(query)).scalars())

    async def deliveries(
        self, endpoint_id: str, *, state: str | None = None, limit: int = 100
    ) -> list[DeliveryView]:
        """An endpoint's deliveries, newest first, with their attempts."""
        async with self._db.read() as session:
            if await session.get(WebhookEndpointRecord, endpoint_id) is None:
                raise NotFound(f"no webhook endpoint {endpoint_id!r}")
            query = select(WebhookDeliveryRecord).where(
                col(WebhookDeliveryRecord.endpoint_id) == endpoint_id
            )
            if state is not None:
                query = query.where(col(WebhookDeliveryRecord.state) == state)
            query = query.order_by(col(WebhookDeliveryRecord.seq).desc()).limit(limit)
            rows = list((await session.execute(query)).scalars())
            tries = select(WebhookAttemptRecord).where(
                col(WebhookAttemptRecord.delivery_seq).in_([r.seq for r in rows])
            )
            by_seq: dict[int, list[WebhookAttemptRecord]] = {}
            for attempt in (
                await session.execute(tries.order_by(col(WebhookAttemptRecord.id)))
            ).scalars():
                by_seq.setdefault(attempt.delivery_seq, []).append(attempt)
        return [DeliveryView(r, by_seq.get(r.seq or 0, [])) for r in rows]

    async def redeliver(self, endpoint_id: str, delivery_id: str, *, actor: str) -> None:
        """Send a delivery again (also a delivered or dead-lettered one), as soon as due."""
        async with self._db.write() as session:
            changed = await session.execute(
                update(WebhookDeliveryRecord)
                .where(
                    col(WebhookDeliveryRecord.id) == delivery_id,
                    col(WebhookDeliveryRecord.endpoint_id) == endpoint_id,
                )
                .values(
                    state="pending", next_attempt_at=self._db.clock(), created_at=self._db.clock()
                )
                .returning(WebhookDeliveryRecord.seq)
            )
            if changed.first() is None:
                raise NotFound(f"no delivery {delivery_id!r} of endpoint {endpoint_id!r}")
            await self._db.audit(
                session,
                "webhook.redelivered",
                entity_type="webhook",
                entity_id=endpoint_id,
                actor=actor,
                payload={"delivery_id": delivery_id},
            )

    async def claim_due(
        self, *, lease_seconds: float, limit: int = 16, batch: int = 20
    ) -> list[list[Claimed]]:
        """Lease, for each endpoint whose oldest pending delivery is due, that delivery
        and up to ``batch - 1`` of the pending ones after it, in event order.

        Only the oldest is locked (``SKIP LOCKED`` on PostgreSQL): whoever holds an
        endpoint's oldest delivery holds the endpoint, since nobody else claims the
        deliveries behind it until it is delivered or dead.
        """
        now = self._db.clock()
        lease = now + timedelta(seconds=lease_seconds)
        async with self._db.write() as session:
            heads = (await session.execute(self._due_heads(now, limit))).all()
            batches = []
            for head, url, secret in heads:
                followers = await session.execute(
                    select(WebhookDeliveryRecord)
                    .where(
                        col(WebhookDeliveryRecord.endpoint_id) == head.endpoint_id,
                        col(WebhookDeliveryRecord.state) == "pending",
                        col(WebhookDeliveryRecord.seq) > head.seq,
                    )
                    .order_by(col(WebhookDeliveryRecord.seq))
                    .limit(batch - 1)
                )
                rows = [head, *followers.scalars()]
                for delivery in rows:
                    delivery.next_attempt_at = lease
                    delivery.attempts += 1
                batches.append([_claimed(d, url, secret) for d in rows])
        return batches

    def _due_heads(self, now: datetime, limit: int) -> Any:
        heads = (
            select(func.min(WebhookDeliveryRecord.seq))
            .where(col(WebhookDeliveryRecord.state) == "pending")
            .group_by(col(WebhookDeliveryRecord.endpoint_id))
        )
        query = (
            select(WebhookDeliveryRecord, WebhookEndpointRecord.url, WebhookEndpointRecord.secret)
            .join(
                WebhookEndpointRecord,
                col(WebhookEndpointRecord.id) == col(WebhookDeliveryRecord.endpoint_id),
            )
            .where(
                col(WebhookDeliveryRecord.seq).in_(heads),
                col(WebhookDeliveryRecord.next_attempt_at) <= now,
            )
            .order_by(col(WebhookDeliveryRecord.seq))
            .limit(limit)
        )
        if self._db.postgres:
            query = query.with_for_update(skip_locked=True, of=WebhookDeliveryRecord)
        return query

    async def release(self, claimed: list[Claimed]) -> None:
        """Give leased, unsent deliveries back (they wait behind a failed one)."""
        if not claimed:
            return
        async with self._db.write() as session:
            await session.execute(
                update(WebhookDeliveryRecord)
                .where(
                    col(WebhookDeliveryRecord.seq).in_([c.seq for c in claimed]),
                    col(WebhookDeliveryRecord.state) == "pending",
                )
                .values(
                    next_attempt_at=self._db.clock(),
                    attempts=WebhookDeliveryRecord.attempts - 1,
                )
            )

    async def record_attempt(
        self,
        claimed: Claimed,
        *,
        status: int | None,
        error: str | None,
        duration_ms: float,
        retry_at: datetime | None,
    ) -> None:
        """Store one try: delivered on a 2xx, else due again at ``retry_at`` or dead."""
        now = self._db.clock()
        delivered = status is not None and 200 <= status < 300
        state = "delivered" if delivered else ("pending" if retry_at is not None else "dead")
        async with self._db.write() as session:
            await session.execute(
                insert(_ATTEMPTS),
                [{"delivery_seq": claimed.seq, "attempted_at": now, "status": status,
                  "error": (error or "")[:500] or None, "duration_ms": duration_ms}],
            )  # fmt: skip
            await session.execute(
                update(WebhookDeliveryRecord)
                .where(col(WebhookDeliveryRecord.seq) == claimed.seq)
                .values(
                    state=state,
                    next_attempt_at=retry_at if state == "pending" else None,
                    delivered_at=now if delivered else None,
                    last_status=status,
                    last_error=(error or "")[:500] or None,
                )
            )
