"""The webhooks' queries: endpoints and their deliveries; register, lease one send, record
attempts.

A lease covers one send. :meth:`WebhookQueries.claim_due` takes, for each endpoint
whose circuit is closed, its oldest pending delivery if it is due (so an endpoint
receives its events in the order they happened) and leases it: ``next_attempt_at``
moves past the send's deadline, in a short transaction; on PostgreSQL with ``FOR UPDATE
SKIP LOCKED``, so several servers on one database never claim the same delivery.
:meth:`~WebhookQueries.record_attempt` stores the outcome and, after a success,
leases the endpoint's next delivery in the same transaction, so the endpoint passes
from one send to the next without anyone else seeing it free. Whoever holds an
endpoint's oldest delivery holds the endpoint: nobody claims the deliveries behind it.
A server killed mid-send leaves a lease that runs out: the delivery is sent again with
the same ``webhook-id``.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, func, insert, or_, select, update
from sqlalchemy.orm import Session, aliased
from sqlmodel import col

from api.service.settings import mask_passwords
from storage.cursors import CursorCodec, continues
from storage.database import Database
from storage.errors import Conflict, InvalidCursor, NotFound
from storage.webhooks.tables import (
    WebhookAttemptRecord,
    WebhookDeliveryRecord,
    WebhookEndpointRecord,
)

__all__ = ["MAX_PAGE", "Claimed", "DeliveryPage", "DeliveryView", "WebhookQueries"]

_ATTEMPTS = WebhookAttemptRecord.__table__  # type: ignore[attr-defined]
#: the most deliveries one page lists
MAX_PAGE = 500


@dataclass(frozen=True)
class Claimed:
    """A delivery leased to this process, with what sending it needs."""

    seq: int
    id: str
    endpoint_id: str
    url: str
    secret: str
    payload: dict[str, Any]
    #: attempts of this delivery's series, this one included
    attempts: int
    #: the first attempt of this series (this one, for a first attempt): the give-up
    #: clock starts there, not at the event, which may have waited behind others
    first_attempt_at: datetime
    #: the endpoint's failed attempts in a row before this one
    endpoint_failures: int
    #: the end of this process's lease: its fencing token (a holder whose lease ran out
    #: and was taken by another finds the delivery's lease changed)
    leased_until: datetime | None = None


@dataclass(frozen=True)
class DeliveryView:
    """A delivery with its attempts, oldest first."""

    delivery: WebhookDeliveryRecord
    attempts: list[WebhookAttemptRecord]


@dataclass(frozen=True)
class DeliveryPage:
    """A page of an endpoint's deliveries, newest first, and the cursor of the next
    page (None on the last)."""

    items: list[DeliveryView]
    next_cursor: str | None


def _claimed(delivery: WebhookDeliveryRecord, endpoint: WebhookEndpointRecord) -> Claimed:
    return Claimed(
        seq=int(delivery.seq or 0), id=delivery.id, endpoint_id=endpoint.id, url=endpoint.url,
        secret=endpoint.secret, payload=dict(delivery.payload), attempts=delivery.attempts,
        first_attempt_at=delivery.first_attempt_at or delivery.created_at,
        endpoint_failures=endpoint.consecutive_failures,
        leased_until=delivery.leased_until,
    )  # fmt: skip


def new_secret() -> str:
    """A Standard Webhooks signing secret: ``whsec_`` and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class WebhookQueries:
    """Endpoints, the outbox's deliveries and their attempts, over the store's database."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._cursors = CursorCodec(db.key, "webhook-deliveries")

    async def create_endpoint(
        self, *, url: str, events: list[str], description: str, actor: str
    ) -> WebhookEndpointRecord:
        """Register an endpoint with a fresh secret (returned once, in the record)."""
        record = WebhookEndpointRecord(
            url=url, events=events, description=description, secret=new_secret(), created_by=actor
        )

        def register(session: Session) -> None:
            session.add(record)
            session.flush()
            self._db.audit(
                session,
                "webhook.created",
                entity_type="webhook",
                entity_id=record.id,
                actor=actor,
                # the log is kept for ever: a credential in the URL is not written there
                payload={"url": mask_passwords(url), "events": events},
            )

        await self._db.run(register)
        return record

    async def endpoints(self) -> list[WebhookEndpointRecord]:
        """Every endpoint, oldest first."""
        query = select(WebhookEndpointRecord).order_by(col(WebhookEndpointRecord.created_at))
        return await self._db.run_read(lambda session: list(session.execute(query).scalars()))

    async def deliveries(
        self, endpoint_id: str, *, state: str | None = None, limit: int = 100
    ) -> list[DeliveryView]:
        """An endpoint's newest deliveries (the first page), with their attempts."""
        return (await self.delivery_page(endpoint_id, state=state, limit=limit)).items

    async def delivery_page(
        self,
        endpoint_id: str,
        *,
        state: str | None = None,
        cursor: str | None = None,
        limit: int = 100,
    ) -> DeliveryPage:
        """A page of an endpoint's deliveries, newest first, with their attempts.

        Keyset paging on ``seq``: the cursor holds the endpoint and the last listed
        ``seq``, signed (``storage.cursors``), and the next page lists the deliveries
        before it, so deliveries written between pages never shift, repeat or skip a
        row. A cursor of another endpoint, or not signed here, raises InvalidCursor.
        """
        before = self._before(endpoint_id, cursor) if continues(cursor) else None
        limit = max(1, min(limit, MAX_PAGE))
        rows = await self._db.run_read(_deliveries, endpoint_id, state, before, limit + 1)
        more = len(rows) > limit
        rows = rows[:limit]
        after = self._cursors.encode([endpoint_id, rows[-1].delivery.seq]) if more else None
        return DeliveryPage(items=rows, next_cursor=after)

    def _before(self, endpoint_id: str, cursor: str) -> int:
        """The ``seq`` a cursor of ``endpoint_id``'s deliveries continues before."""
        position = self._cursors.decode(cursor)
        match position:
            case [str(of), int(seq)] if of == endpoint_id and not isinstance(seq, bool):
                return seq
        raise InvalidCursor("the cursor is not one this service issued for this endpoint")

    async def redeliver(self, endpoint_id: str, delivery_id: str, *, actor: str) -> None:
        """Send a delivery again (also a delivered or dead-lettered one), as soon as due.

        An open circuit lets this one through: the endpoint is due now, and a failure
        opens it again for longer (its failures in a row are kept).
        """
        await self._db.run(self._redeliver, endpoint_id, delivery_id, actor)

    def _redeliver(self, session: Session, endpoint_id: str, delivery_id: str, actor: str) -> None:
        now = self._db.clock()
        found = session.execute(
            select(WebhookDeliveryRecord)
            .where(
                col(WebhookDeliveryRecord.id) == delivery_id,
                col(WebhookDeliveryRecord.endpoint_id) == endpoint_id,
            )
            .with_for_update()
        ).scalar_one_or_none()
        if found is None:
            raise NotFound(f"no delivery {delivery_id!r} of endpoint {endpoint_id!r}")
        if found.leased_until is not None and found.leased_until > now:
            raise Conflict(
                f"delivery {delivery_id!r} is being sent now: redeliver it once that "
                "attempt is recorded (its attempts list shows it)"
            )
        # the old lease goes: a sender whose lease ran out records its attempt later
        # fenced by it, and must not end (deliver or dead-letter) the new series
        found.state, found.next_attempt_at, found.leased_until = "pending", now, None
        # a new series: its backoff starts from SRE_JUDGE_WEBHOOK_RETRY_SECONDS again, and
        # its give-up clock from its next attempt (the earlier attempts stay in its
        # attempts list); created_at stays the event's time: the order is seq's
        found.attempts, found.first_attempt_at, found.delivered_at = 0, None, None
        session.execute(
            update(WebhookEndpointRecord)
            .where(col(WebhookEndpointRecord.id) == endpoint_id)
            .values(circuit_open_until=None)
        )
        self._db.audit(
            session,
            "webhook.redelivered",
            entity_type="webhook",
            entity_id=endpoint_id,
            actor=actor,
            payload={"delivery_id": delivery_id},
        )

    async def claim_due(
        self,
        *,
        lease_seconds: float,
        skip: frozenset[str] = frozenset(),
        limit: int = 100,
        look: bool = True,
    ) -> list[Claimed]:
        """Lease, for each endpoint (but those in ``skip``) whose circuit is closed and
        whose oldest pending delivery is due, that one delivery; oldest first.

        Only the oldest is claimable (``SKIP LOCKED`` on PostgreSQL): whoever holds an
        endpoint's oldest delivery holds the endpoint. On SQLite, where a write
        transaction takes the database's one write lock, it looks in a read first, so
        that the idle polls of every process never hold up a writer; ``look=False``
        leases at once, for a caller just told that deliveries were committed.
        """
        if look and not self._db.postgres:
            due = self._due(self._db.clock(), skip=skip, limit=1)
            probe = due.with_only_columns(col(WebhookDeliveryRecord.seq))
            if not await self._db.run_read(lambda s: s.execute(probe).first()):
                return []
        return await self._db.run(self._lease, lease_seconds, skip=skip, limit=limit)

    def _due(
        self,
        now: datetime,
        *,
        skip: frozenset[str] = frozenset(),
        endpoint_id: str | None = None,
        limit: int,
    ) -> Select[WebhookDeliveryRecord, WebhookEndpointRecord]:
        """The due head deliveries (with their endpoints) of active endpoints whose circuit is
        closed, oldest first."""
        heads = select(func.min(WebhookDeliveryRecord.seq)).where(
            col(WebhookDeliveryRecord.state) == "pending"
        )
        if endpoint_id is not None:
            heads = heads.where(col(WebhookDeliveryRecord.endpoint_id) == endpoint_id)
        heads = heads.group_by(col(WebhookDeliveryRecord.endpoint_id))
        in_flight = aliased(WebhookDeliveryRecord)
        sending = (
            select(col(in_flight.seq))
            .where(
                col(in_flight.endpoint_id) == col(WebhookDeliveryRecord.endpoint_id),
                col(in_flight.leased_until) > now,
            )
            .exists()
        )
        query = (
            select(WebhookDeliveryRecord, WebhookEndpointRecord)
            .join(
                WebhookEndpointRecord,
                col(WebhookEndpointRecord.id) == col(WebhookDeliveryRecord.endpoint_id),
            )
            .where(
                col(WebhookDeliveryRecord.seq).in_(heads),
                col(WebhookDeliveryRecord.next_attempt_at) <= now,
                ~sending,  # one send at a time per endpoint
                col(WebhookEndpointRecord.active).is_(True),  # one switched off gets none
                or_(
                    col(WebhookEndpointRecord.circuit_open_until).is_(None),
                    col(WebhookEndpointRecord.circuit_open_until) <= now,
                ),
            )
            .order_by(col(WebhookDeliveryRecord.seq))
            .limit(limit)
        )
        if skip:
            query = query.where(col(WebhookDeliveryRecord.endpoint_id).not_in(sorted(skip)))
        return query

    def _lease(
        self,
        session: Session,
        lease_seconds: float,
        *,
        skip: frozenset[str] = frozenset(),
        endpoint_id: str | None = None,
        limit: int,
    ) -> list[Claimed]:
        now = self._db.clock()
        query = self._due(now, skip=skip, endpoint_id=endpoint_id, limit=limit)
        if self._db.postgres:
            query = query.with_for_update(skip_locked=True, of=WebhookDeliveryRecord)
        lease = now + timedelta(seconds=lease_seconds)
        claimed = []
        for delivery, endpoint in session.execute(query).all():
            delivery.next_attempt_at = delivery.leased_until = lease
            delivery.attempts += 1
            if delivery.first_attempt_at is None:  # the first of its series
                delivery.first_attempt_at = now
            claimed.append(_claimed(delivery, endpoint))
        return claimed

    async def give_back(self, claimed: Sequence[Claimed]) -> None:
        """Undo the leases of ``claimed``, not sent (a stop came before their send): each
        due again now, its attempt not counted (nor, for the first of its series, its
        give-up clock started). Fenced by the lease: nothing changes once it ran out and
        another holder took the delivery."""
        if claimed:
            await self._db.run(_give_back, claimed, self._db.clock())

    async def record_attempt(
        self,
        claimed: Claimed,
        *,
        status: int | None,
        error: str | None,
        duration_ms: float,
        retry_at: datetime | None,
        circuit_open_until: datetime | None = None,
        lease_next: float | None = None,
    ) -> Claimed | None:
        """Store one send: delivered on a 2xx (the endpoint's circuit closes), else due
        again at ``retry_at`` or dead, the endpoint's failures in a row counted and its
        circuit open until ``circuit_open_until``.

        With ``lease_next`` (seconds) after a delivered send, the endpoint's next due
        delivery is leased in the same transaction and returned.

        A holder whose lease ran out and was taken by another process (frozen, say)
        records its attempt, which happened, but changes nothing else: not the delivery's
        state or lease, which are the new holder's, nor the endpoint's circuit, and it
        leases nothing, so the endpoint still gets one send at a time.
        """
        now = self._db.clock()
        delivered = status is not None and 200 <= status < 300 and error is None
        state = "delivered" if delivered else ("pending" if retry_at is not None else "dead")
        stored_error = (error or "")[:500] or None

        def record(session: Session) -> Claimed | None:
            session.execute(
                insert(_ATTEMPTS),
                [{"delivery_seq": claimed.seq, "attempted_at": now, "status": status,
                  "error": stored_error, "duration_ms": duration_ms}],
            )  # fmt: skip
            held = session.connection().execute(
                update(WebhookDeliveryRecord)
                .where(
                    col(WebhookDeliveryRecord.seq) == claimed.seq,
                    col(WebhookDeliveryRecord.leased_until) == claimed.leased_until,
                )
                .values(
                    state=state,
                    next_attempt_at=retry_at if state == "pending" else None,
                    leased_until=None,
                    delivered_at=now if delivered else None,
                    last_status=status,
                    last_error=stored_error,
                )
            )
            if held.rowcount == 0:  # the lease was lost: the new holder decides the rest
                return None
            if not delivered or claimed.endpoint_failures:  # a closed circuit stays as it is
                session.execute(
                    update(WebhookEndpointRecord)
                    .where(col(WebhookEndpointRecord.id) == claimed.endpoint_id)
                    .values(
                        consecutive_failures=0 if delivered else claimed.endpoint_failures + 1,
                        circuit_open_until=None if delivered else circuit_open_until,
                    )
                )
            # given up: a state change the audit log keeps, audited after the endpoint's
            # row is written (rows first, the audit chain's lock last: storage.database)
            if state == "dead":
                self._audit_given_up(session, claimed, status, stored_error)
            if not delivered or lease_next is None:
                return None
            following = self._lease(session, lease_next, endpoint_id=claimed.endpoint_id, limit=1)
            return following[0] if following else None

        return await self._db.run(record)

    def _audit_given_up(
        self, session: Session, claimed: Claimed, status: int | None, error: str | None
    ) -> None:
        """``webhook.dead_lettered``: the delivery loop gave ``claimed`` up."""
        self._db.audit(
            session,
            "webhook.dead_lettered",
            entity_type="webhook",
            entity_id=claimed.endpoint_id,
            actor="webhooks",
            payload={
                "delivery_id": claimed.id,
                "event": claimed.payload.get("type"),
                "attempts": claimed.attempts,
                "last_status": status,
                "last_error": error,
            },
        )


def _deliveries(
    session: Session, endpoint_id: str, state: str | None, before: int | None, limit: int
) -> list[DeliveryView]:
    """An endpoint's deliveries before ``seq`` ``before`` (all without it), newest first,
    with their attempts (``NotFound``)."""
    if session.get(WebhookEndpointRecord, endpoint_id) is None:
        raise NotFound(f"no webhook endpoint {endpoint_id!r}")
    query = select(WebhookDeliveryRecord).where(
        col(WebhookDeliveryRecord.endpoint_id) == endpoint_id
    )
    if state is not None:
        query = query.where(col(WebhookDeliveryRecord.state) == state)
    if before is not None:
        query = query.where(col(WebhookDeliveryRecord.seq) < before)
    query = query.order_by(col(WebhookDeliveryRecord.seq).desc()).limit(limit)
    rows = list(session.execute(query).scalars())
    tries = select(WebhookAttemptRecord).where(
        col(WebhookAttemptRecord.delivery_seq).in_([r.seq for r in rows])
    )
    by_seq: dict[int, list[WebhookAttemptRecord]] = {}
    for attempt in session.execute(tries.order_by(col(WebhookAttemptRecord.id))).scalars():
        by_seq.setdefault(attempt.delivery_seq, []).append(attempt)
    return [DeliveryView(r, by_seq.get(r.seq or 0, [])) for r in rows]


def _give_back(session: Session, claimed: Sequence[Claimed], now: datetime) -> None:
    """Undo the leases of ``claimed``, not sent: each due again from ``now``, its attempt
    not counted (nor, for the first of its series, its give-up clock started). Fenced by
    the lease: nothing changes once it ran out and another holder took the delivery."""
    for one in claimed:
        values: dict[str, Any] = {
            "leased_until": None,
            "next_attempt_at": now,
            "attempts": col(WebhookDeliveryRecord.attempts) - 1,
        }
        if one.attempts == 1:
            values["first_attempt_at"] = None
        session.execute(
            update(WebhookDeliveryRecord)
            .where(
                col(WebhookDeliveryRecord.seq) == one.seq,
                col(WebhookDeliveryRecord.leased_until) == one.leased_until,
            )
            .values(values)
            .execution_options(synchronize_session=False)
        )
