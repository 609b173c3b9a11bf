"""The one database handle every repository of the store shares.

It holds the engine, the sessions, the clock and the write lock; repositories open
their transactions through it and pass its sessions to one another when one
transaction spans several aggregates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from storage.audit import COVERS, ChainKey, append_events, grading_digests
from storage.audit.records import ROWS, RecordRow, rows_payload
from storage.canonical import utcnow
from storage.db import is_postgres, read_only, session_factory
from storage.keys import ServiceKey

__all__ = ["AuditSubscriber", "Database"]

#: hears the events of an audited transaction, inside it: ``(session, events, at=...)``,
#: each event with ``event``, ``entity_type``, ``entity_id``, ``actor`` and ``payload``
AuditSubscriber = Callable[..., Awaitable[object]]


class Database:
    """The engine, sessions and clock; each public store method runs in one transaction."""

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        clock: Callable[[], datetime] = utcnow,
        key: ServiceKey | None = None,
    ) -> None:
        """Use ``engine`` (migrated); ``clock`` returns aware UTC time (tests move it).

        ``key`` is the service key (see ``storage.keys``); without one, a random key
        that lives as long as this handle.
        """
        self.engine = engine
        #: the service key: audit hashes and cursors derive their keys from it
        self.key = key or ServiceKey.ephemeral()
        #: the audit chain's HMAC key, derived once
        self.chain_key = ChainKey.of(self.key)
        #: aware UTC time now
        self.clock = clock
        #: True on PostgreSQL (row locks, REPEATABLE READ snapshots), False on SQLite
        self.postgres = is_postgres(engine)
        self._write_sessions = session_factory(engine)
        #: one write transaction at a time in this process (SQLite only; see ``write``)
        self._write_lock = None if self.postgres else asyncio.Lock()
        self._read_sessions = session_factory(read_only(engine))
        self._subscribers: list[AuditSubscriber] = []

    def subscribe(self, subscriber: AuditSubscriber) -> None:
        """Let ``subscriber`` hear every audited event from now on, in the event's own
        transaction (committed with it, or rolled back with it): how a feature that must
        hear of another's events subscribes, as the webhooks' outbox does."""
        self._subscribers.append(subscriber)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """A session in a write transaction (BEGIN IMMEDIATE on SQLite), committed on exit.

        On SQLite the writers of this process also queue on an asyncio lock: SQLite
        admits one writer at a time anyway, and a writer refused with SQLITE_BUSY
        sleeps in its busy handler (up to 100 ms a round) instead of being handed the
        lock when it frees. Writers of other processes still meet the busy handler.
        """
        async with (
            self._write_lock or contextlib.nullcontext(),
            self._write_sessions() as session,
            session.begin(),
        ):
            yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        """A session in a read-only transaction that never waits for writers."""
        async with self._read_sessions() as session, session.begin():
            yield session

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[AsyncSession]:
        """A read transaction whose statements all see the same data."""
        async with self.read() as session:
            if self.postgres:
                await session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            yield session

    @asynccontextmanager
    async def reading(self, tx: AsyncSession | None) -> AsyncIterator[AsyncSession]:
        """``tx`` when a caller reads inside its own transaction (one snapshot for several
        reads), else a read transaction of its own."""
        if tx is not None:
            yield tx
            return
        async with self.read() as session:
            yield session

    @asynccontextmanager
    async def writing(self, tx: AsyncSession | None) -> AsyncIterator[AsyncSession]:
        """``tx`` when a use case writes inside its own transaction (one transaction for
        its reads and writes), else a write transaction of its own."""
        if tx is not None:
            yield tx
            return
        async with self.write() as session:
            yield session

    async def insert_ignore(
        self, session: AsyncSession, table: Table, values: dict[str, Any]
    ) -> bool:
        """INSERT ... ON CONFLICT DO NOTHING; True when a row was inserted."""
        dialect = postgresql if self.postgres else sqlite
        primary_key = list(table.primary_key.columns)
        statement = (
            dialect.insert(table).values(**values).on_conflict_do_nothing().returning(*primary_key)
        )
        # RETURNING, not rowcount: drivers report -1 for INSERT rowcounts
        return (await session.execute(statement)).first() is not None

    async def audit(
        self,
        session: AsyncSession,
        event: str,
        *,
        entity_type: str,
        entity_id: str,
        actor: str,
        payload: dict[str, Any],
        covers: Collection[str] | Mapping[str, str] = (),
        rows: Sequence[RecordRow] = (),
    ) -> None:
        """Append an audit event; call after the transaction's other writes.

        ``covers``: the gradings this transaction wrote (their rows or answers); the
        event carries a digest of each one's state as it now stands, so that
        ``audit verify`` can tell an edit of the tables from the state the log saw.
        Given as ids, the digests are read from the tables; given as ``{id: digest}``
        (``storage.audit.values_digest`` of the values just written), they are not.
        ``rows``: the evidentiary records this transaction wrote (``storage.audit.records``:
        submissions, scenarios and their versions, overrides, labels, tags, judge calls),
        as flushed record objects or ``(table, values written)``; the event carries each
        one's digest. The subscribers (see :meth:`subscribe`) hear the event in the same
        transaction, without the digests.
        """
        fields = {"event": event, "entity_type": entity_type, "entity_id": entity_id}
        events = [{**fields, "actor": actor, "payload": payload}]
        await self.audit_many(session, events, {0: covers}, {0: rows})

    async def audit_many(
        self,
        session: AsyncSession,
        events: Sequence[dict[str, Any]],
        covers: Mapping[int, Collection[str] | Mapping[str, str]] | None = None,
        rows: Mapping[int, Sequence[RecordRow]] | None = None,
    ) -> None:
        """Append several events in order with one INSERT (see ``audit``).

        Each event holds ``event``, ``entity_type``, ``entity_id``, ``actor`` and
        ``payload``; ``covers`` maps an event's index to the gradings it covers, ``rows``
        to the records it covers.
        """
        at = self.clock()
        stored = []
        for index, event in enumerate(events):
            covered = (covers or {}).get(index) or ()
            if covered and not isinstance(covered, Mapping):
                await session.flush()
                covered = await grading_digests(session, list(covered))
            if covered:
                event = {**event, "payload": {**event["payload"], COVERS: dict(covered)}}
            records = (rows or {}).get(index)
            if records:
                event = {**event, "payload": {**event["payload"], ROWS: rows_payload(records)}}
            stored.append(event)
        await append_events(session, stored, key=self.chain_key, at=at)
        # the subscribers get the payloads without the digests
        for subscriber in self._subscribers:
            await subscriber(session, events, at=at)
