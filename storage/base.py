"""What every part of the store shares: the engine, sessions, the clock, a few helpers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from storage.audit import append_event
from storage.canonical import utcnow
from storage.db import is_postgres, read_only, session_factory

__all__ = ["StoreBase"]


class StoreBase:
    """Holds the engine; each public store method runs in one transaction of its own."""

    def __init__(self, engine: AsyncEngine, *, clock: Callable[[], datetime] = utcnow) -> None:
        """Use ``engine`` (migrated); ``clock`` returns aware UTC time (tests move it)."""
        self.engine = engine
        self._clock = clock
        self._postgres = is_postgres(engine)
        self._write_sessions = session_factory(engine)
        #: one write transaction at a time in this process (SQLite only; see ``_write``)
        self._write_lock = None if self._postgres else asyncio.Lock()
        self._read_sessions = session_factory(read_only(engine))
        #: rubric versions seen committed in this database (they never change)
        self._known_rubrics: set[str] = set()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncSession]:
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
    async def _read(self) -> AsyncIterator[AsyncSession]:
        """A session in a read-only transaction that never waits for writers."""
        async with self._read_sessions() as session, session.begin():
            yield session

    async def _insert_ignore(
        self, session: AsyncSession, table: Table, values: dict[str, Any]
    ) -> bool:
        """INSERT ... ON CONFLICT DO NOTHING; True when a row was inserted."""
        dialect = postgresql if self._postgres else sqlite
        primary_key = list(table.primary_key.columns)
        statement = (
            dialect.insert(table).values(**values).on_conflict_do_nothing().returning(*primary_key)
        )
        # RETURNING, not rowcount: drivers report -1 for INSERT rowcounts
        return (await session.execute(statement)).first() is not None

    async def _audit(
        self,
        session: AsyncSession,
        event: str,
        *,
        entity_type: str,
        entity_id: str,
        actor: str,
        payload: dict[str, Any],
    ) -> None:
        """Append an audit event; call after the transaction's other writes."""
        await append_event(
            session,
            event=event,
            entity_type=entity_type,
            entity_id=entity_id,
            actor=actor,
            payload=payload,
            at=self._clock(),
        )
