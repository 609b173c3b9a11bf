"""The one database handle every repository of the store shares.

It holds the engine, the sessions, the clock and the write lock. A use case runs
whole in one transaction: ``await db.run(fn, ...)`` calls ``fn(session, ...)`` in a
worker thread over synchronous SQLAlchemy (one thread hop per transaction, the event
loop never waits for the database), committed when ``fn`` returns and rolled back when
it raises; ``await db.run_read(fn, ...)`` is one read-only snapshot.

Lock order: row locks first, the audit chain's lock last. On PostgreSQL an audited
transaction holds the chain's advisory lock from its first append (``audit``) until it
ends, so it must take no row lock after it: one that did would wait for a writer that
holds that row and waits to audit, a deadlock PostgreSQL ends by aborting one of them.
Lock (``FOR UPDATE``) or write every row the transaction will change, then audit. A
transaction that writes and audits row after row collects its events in an
:class:`AuditBatch` and appends them once every row is written.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqlalchemy import Table, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

from storage.audit import COVERS, ChainKey, append_events, grading_digests
from storage.audit.records import ROWS, RecordRow, rows_payload
from storage.canonical import utcnow
from storage.engine import is_postgres, read_only, session_factory
from storage.keys import ServiceKey

__all__ = ["AuditBatch", "AuditSubscriber", "Database", "HeldRead", "hold_named_lock"]

#: hears the events of an audited transaction, inside it: ``(session, events, at=...)``,
#: each event with ``event``, ``entity_type``, ``entity_id``, ``actor`` and ``payload``
AuditSubscriber = Callable[..., object]

_P = ParamSpec("_P")
_T = TypeVar("_T")


def hold_named_lock(session: Session, *name: str) -> None:
    """Hold the lock named by ``name``'s parts until ``session``'s transaction ends, so
    that the writes it guards happen one after another across processes: a
    transaction-scoped advisory lock on PostgreSQL (no row needed); on SQLite the write
    transaction holds the database's one write lock already."""
    if session.connection().dialect.name != "postgresql":
        return
    digest = hashlib.sha256("\0".join(name).encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    session.execute(select(func.pg_advisory_xact_lock(key)))


class AuditBatch:
    """Audit events a transaction collects as it writes (``Database.audit(..., into=)``),
    appended in order with one ``Database.audit_many`` once all its rows are written: a
    transaction writing many audited rows takes every row lock (a foreign key's too)
    before the audit chain's lock."""

    def __init__(self) -> None:
        """No events yet."""
        #: the events in order, as ``Database.audit_many`` takes them
        self.events: list[dict[str, Any]] = []
        #: event index -> the gradings it covers
        self.covers: dict[int, Collection[str] | Mapping[str, str]] = {}
        #: event index -> the records it covers
        self.rows: dict[int, Sequence[RecordRow]] = {}

    def add(
        self,
        event: dict[str, Any],
        covers: Collection[str] | Mapping[str, str] = (),
        rows: Sequence[RecordRow] = (),
    ) -> None:
        """Collect ``event`` after the others, covering ``covers`` and ``rows``."""
        index = len(self.events)
        self.events.append(event)
        if covers:
            self.covers[index] = covers
        if rows:
            self.rows[index] = rows


class HeldRead:
    """A read-only snapshot held open across awaits (``Database.held_read``): a
    synchronous session used only from one thread of its own."""

    def __init__(self, session: Session, thread: ThreadPoolExecutor) -> None:
        """Run calls on ``session`` in ``thread`` (a one-thread executor)."""
        self._session = session
        self._thread = thread

    async def run(
        self, fn: Callable[Concatenate[Session, _P], _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(session, *args, **kwargs)`` on the snapshot's thread, in a copy of the
        caller's context (its log fields). Objects ``fn`` returns are detached from the
        session (``fn`` must load what the caller reads)."""
        return await _in_thread(_detached, self._session, fn, args, kwargs, executor=self._thread)


class Database:
    """The engine, sessions and clock; each public store method runs in one transaction."""

    def __init__(
        self,
        engine: Engine,
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
        #: one write transaction at a time in this process (SQLite only; see ``run``)
        self._write_lock = None if self.postgres else asyncio.Lock()
        self._sync_writes = session_factory(engine)
        self._sync_reads = session_factory(read_only(engine))
        self._subscribers: list[AuditSubscriber] = []

    def sessions(self, *, read: bool = False) -> sessionmaker[Session]:
        """Sessions over this database (``read``: read-only, BEGIN DEFERRED on SQLite),
        for work that cannot be one use case, such as a stream read in batches."""
        return self._sync_reads if read else self._sync_writes

    async def run(
        self, fn: Callable[Concatenate[Session, _P], _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(session, *args, **kwargs)`` in one write transaction, in a worker thread.

        Committed when ``fn`` returns, rolled back when it raises (the exception is
        raised here). On SQLite the writers of this process take turns on an asyncio
        lock: SQLite admits one writer at a time anyway, and a writer refused with
        SQLITE_BUSY sleeps in its busy handler (up to 100 ms a round) instead of being
        handed the lock when it frees. A database busy with another process's writer
        blocks the worker thread, never the event loop. A caller cancelled meanwhile
        still waits for the transaction to end, so the turn is never handed on while it
        runs.
        """
        async with self._write_lock or contextlib.nullcontext():
            return await _in_thread(_transaction, self._sync_writes, False, fn, args, kwargs)

    async def run_read(
        self, fn: Callable[Concatenate[Session, _P], _T], *args: _P.args, **kwargs: _P.kwargs
    ) -> _T:
        """``fn(session, *args, **kwargs)`` in one read-only snapshot, in a worker thread:
        every statement of ``fn`` sees the same data (REPEATABLE READ on PostgreSQL, one
        deferred transaction on SQLite), and it never waits for writers."""
        snapshot = self.postgres
        return await _in_thread(_transaction, self._sync_reads, snapshot, fn, args, kwargs)

    @asynccontextmanager
    async def held_read(self) -> AsyncIterator[HeldRead]:
        """One read-only transaction held for as long as the block runs, for a read that
        cannot be one call, such as a stream read in batches: every
        :meth:`HeldRead.run` sees the same data (REPEATABLE READ on PostgreSQL, one
        deferred transaction on SQLite), as one ``run_read`` does.

        The session lives on a thread of its own, so a block cancelled or failing while
        a call is under way closes it only after that call ends.
        """
        session = self._sync_reads()
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sre-judge-read")
        try:
            try:
                await _in_thread(_begin_read, session, self.postgres, executor=thread)
                yield HeldRead(session, thread)
            finally:
                # queued behind any call still under way; runs even if this wait is cancelled
                await _in_thread(session.close, executor=thread)
        finally:
            thread.shutdown(wait=False)

    def subscribe(self, subscriber: AuditSubscriber) -> None:
        """Let ``subscriber`` hear every audited event from now on, in the event's own
        transaction (committed with it, or rolled back with it): how a feature that must
        hear of another's events subscribes, as the webhooks' outbox does."""
        self._subscribers.append(subscriber)

    def insert_ignore(self, session: Session, table: Table, values: dict[str, Any]) -> bool:
        """INSERT ... ON CONFLICT DO NOTHING; True when a row was inserted."""
        dialect = postgresql if self.postgres else sqlite
        primary_key = list(table.primary_key.columns)
        statement = (
            dialect.insert(table).values(**values).on_conflict_do_nothing().returning(*primary_key)
        )
        # RETURNING, not rowcount: drivers report -1 for INSERT rowcounts
        return session.execute(statement).first() is not None

    def upsert(self, session: Session, table: Table, values: dict[str, Any]) -> None:
        """INSERT the row, or UPDATE the row of the same primary key with ``values``: one
        statement where a read and a write were two. The session's identity map is not
        told: use it for rows the transaction has not loaded."""
        dialect = postgresql if self.postgres else sqlite
        primary_key = [column.name for column in table.primary_key.columns]
        statement = dialect.insert(table).values(**values)
        changed = {name: statement.excluded[name] for name in values if name not in primary_key}
        session.execute(statement.on_conflict_do_update(index_elements=primary_key, set_=changed))

    def audit(
        self,
        session: Session,
        event: str,
        *,
        entity_type: str,
        entity_id: str,
        actor: str,
        payload: dict[str, Any],
        covers: Collection[str] | Mapping[str, str] = (),
        rows: Sequence[RecordRow] = (),
        into: AuditBatch | None = None,
    ) -> None:
        """Append an audit event; call after the transaction's other writes and row
        locks (the module's lock order: it takes the audit chain's lock until commit).

        ``covers``: the gradings this transaction wrote (their rows or answers); the
        event carries a digest of each one's state as it now stands, so that
        ``audit verify`` can tell an edit of the tables from the state the log saw.
        Given as ids, the digests are read from the tables; given as ``{id: digest}``
        (``storage.audit.values_digest`` of the values just written), they are not.
        ``rows``: the evidentiary records this transaction wrote (``storage.audit.records``:
        submissions, scenarios and their versions, overrides, labels, tags, judge calls),
        as flushed record objects or ``(table, values written)``; the event carries each
        one's digest. The subscribers (see :meth:`subscribe`) hear the event in the same
        transaction, without the digests. ``into``: the event is collected there instead,
        to be appended with the batch's others (the digests read then).
        """
        fields = {"event": event, "entity_type": entity_type, "entity_id": entity_id}
        record = {**fields, "actor": actor, "payload": payload}
        if into is not None:
            into.add(record, covers, rows)
        else:
            self.audit_many(session, [record], {0: covers}, {0: rows})

    def audit_many(
        self,
        session: Session,
        events: Sequence[dict[str, Any]],
        covers: Mapping[int, Collection[str] | Mapping[str, str]] | None = None,
        rows: Mapping[int, Sequence[RecordRow]] | None = None,
    ) -> None:
        """Append several events in order with one INSERT (see ``audit``).

        Each event holds ``event``, ``entity_type``, ``entity_id``, ``actor`` and
        ``payload``; ``covers`` maps an event's index to the gradings it covers, ``rows``
        to the records it covers.
        """
        at, covers = self.clock(), covers or {}
        # covers given as grading ids: their state as the session holds it, read in one go
        ids = [i for c in covers.values() if not isinstance(c, Mapping) for i in c]
        session.flush()
        read = grading_digests(session, ids) if ids else {}
        stored = []
        for index, event in enumerate(events):
            covered = covers.get(index) or ()
            digests: Mapping[str, str | None] = (
                covered if isinstance(covered, Mapping) else {i: read[i] for i in covered}
            )
            if digests:
                event = {**event, "payload": {**event["payload"], COVERS: dict(digests)}}
            records = (rows or {}).get(index)
            if records:
                event = {**event, "payload": {**event["payload"], ROWS: rows_payload(records)}}
            stored.append(event)
        append_events(session, stored, key=self.chain_key, at=at)
        # the subscribers get the payloads without the digests
        for subscriber in self._subscribers:
            subscriber(session, events, at=at)


def _transaction(
    sessions: sessionmaker[Session],
    snapshot: bool,
    fn: Callable[..., _T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> _T:
    """``fn(session, *args, **kwargs)`` in one transaction of a session from ``sessions``."""
    with sessions() as session, session.begin():
        if snapshot:
            session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
        return fn(session, *args, **kwargs)


def _begin_read(session: Session, postgres: bool) -> None:
    """Begin ``session``'s read transaction: REPEATABLE READ on PostgreSQL, BEGIN
    DEFERRED on SQLite (its sessions are ``read_only``)."""
    session.begin()
    if postgres:
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})
    else:
        session.connection()


def _detached(
    session: Session, fn: Callable[..., _T], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _T:
    """``fn(session, *args, **kwargs)``, then every object it loaded detached: the caller
    reads them on another thread, and the next call must not change them."""
    try:
        return fn(session, *args, **kwargs)
    finally:
        session.expunge_all()


async def _in_thread(
    call: Callable[..., _T], *args: Any, executor: ThreadPoolExecutor | None = None
) -> _T:
    """``call(*args)`` in a worker thread (of ``executor``, else the loop's default), in a
    copy of the caller's context (its log fields); a cancelled caller waits for it to end
    first, however often it is cancelled again meanwhile (a stop re-cancels a task that
    runs on)."""
    context = contextvars.copy_context()
    future = asyncio.get_running_loop().run_in_executor(executor, context.run, call, *args)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        while not future.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait({future})
        if not future.cancelled():
            future.exception()  # retrieved: the caller's cancellation is what it sees
        raise
