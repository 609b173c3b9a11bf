"""The append-only audit log: a keyed hash chain over every row.

Each row's ``hash`` is an HMAC-SHA256 of ``prev_hash + canonical_json(row)`` where the
JSON holds every other column (``seq``, ``created_at``, ``event``, ``entity_type``,
``entity_id``, ``actor``, ``payload``), so changing any field of any row, ``seq``
included, breaks that row's hash or the link to it. The HMAC key derives from the
service key (``storage.keys``), which the database never holds: someone who can write
the database cannot recompute the chain after a rewrite.

A keyed hash reads ``k:<key id>:<53 hex digits of the HMAC>`` (64 characters, the
column's width); rows written before keys existed hold a plain ``sha256`` (64 hex
digits) and are verified as *legacy* rows (see ``storage.audit.verify``).

``seq`` is assigned as last + 1 while the chain is locked: on PostgreSQL by a
transaction-scoped advisory lock, on SQLite by the write lock that ``BEGIN IMMEDIATE``
takes (see ``storage.engine``). ``seq`` is the primary key, so even a writer that bypassed
the lock could not fork the chain, only fail.

On SQLite the head an engine last wrote is remembered as a hint, so an append need not
read the head first: each row is inserted only if the chain's last row is the one it
links to (the guard is part of the INSERT, evaluated under the write lock). When another
process or engine has appended since, nothing is inserted, and the append reads the head
and writes again: one statement fewer on a grading's path, never a fork. PostgreSQL reads
the head under its lock (psycopg reports no reliable row count for an executemany, which
the guard's outcome is read from).

No code path updates or deletes audit rows.

:func:`last_append` tells what a transaction's latest append linked to and ended at: a
row that links to the head this engine last saw proves that nobody appended between, so
state that only changes with an audited event (the webhook endpoints) is unchanged too.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, insert, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.canonical import canonical_json, iso_utc, sha256_hex, utcnow
from storage.keys import ServiceKey
from storage.tables import AuditRecord

__all__ = [
    "AUDIT_LOCK_KEY",
    "GENESIS_HASH",
    "KEYED_PREFIX",
    "AuditEntry",
    "ChainKey",
    "KeyMismatch",
    "Link",
    "append_event",
    "append_events",
    "hash_key_id",
    "last_append",
    "newest_key_id",
    "row_hash",
]

#: ``prev_hash`` of the first row
GENESIS_HASH = "0" * 64
#: the PostgreSQL advisory lock that serializes appends (ASCII "srejudge")
AUDIT_LOCK_KEY = 0x7372656A75646765
#: how a keyed row hash begins; a legacy (unkeyed) hash is 64 hex digits
KEYED_PREFIX = "k:"
_KID_CHARS = 8
_MAC_CHARS = 64 - len(KEYED_PREFIX) - _KID_CHARS - 1
#: ``session.info`` key of the chain head this transaction last wrote
_HEAD = "sre_judge_audit_head"
#: ``session.info`` key of the :class:`Link` of this transaction's latest append
_LINK = "sre_judge_audit_link"
_AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]
#: SQLite engine -> (next seq, hash of the last row) it appended: a hint, checked on use
_HINTS: weakref.WeakKeyDictionary[Engine, tuple[int, str]] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class ChainKey:
    """The audit chain's HMAC key and the short key id written into every keyed hash."""

    mac_key: bytes
    key_id: str

    @classmethod
    def of(cls, key: ServiceKey) -> ChainKey:
        """The chain key derived from the service key (purpose ``"audit"``)."""
        return cls(mac_key=key.derive("audit"), key_id=key.key_id[:_KID_CHARS])


class KeyMismatch(RuntimeError):
    """An append would link a row keyed with one key to a head keyed with another."""


def hash_key_id(value: str) -> str | None:
    """The key id of a keyed hash, or None for a legacy (plain sha256) hash."""
    if not value.startswith(KEYED_PREFIX):
        return None
    return value[len(KEYED_PREFIX) : len(KEYED_PREFIX) + _KID_CHARS]


def newest_key_id(engine: Engine) -> str | None:
    """The key id of the audit log's newest row: the key every process writing to this
    database must hold. None for a database without an audit log yet, or whose newest
    row is a legacy (unkeyed) one."""
    from sqlalchemy import inspect

    with engine.connect() as connection:
        if not inspect(connection).has_table(AuditRecord.__tablename__):
            return None
        newest = connection.execute(
            select(col(AuditRecord.hash)).order_by(col(AuditRecord.seq).desc()).limit(1)
        ).scalar_one_or_none()
    return hash_key_id(newest) if newest is not None else None


def row_hash(
    *,
    seq: int,
    created_at: datetime,
    event: str,
    entity_type: str,
    entity_id: str,
    actor: str,
    payload: Any,
    prev_hash: str,
    key: ChainKey | None,
) -> str:
    """The hash of one audit row: covers every column but ``hash`` itself.

    Keyed with ``key``; without one, the legacy plain sha256 (for checking old rows).
    """
    content = canonical_json(
        {
            "seq": seq,
            "created_at": iso_utc(created_at),
            "event": event,
            "entity_type": entity_type,
            "entity_id": entity_id,
            "actor": actor,
            "payload": payload,
        }
    )
    if key is None:
        return sha256_hex(prev_hash + content)
    mac = hmac.new(key.mac_key, (prev_hash + content).encode("utf-8"), hashlib.sha256)
    return f"{KEYED_PREFIX}{key.key_id}:{mac.hexdigest()[:_MAC_CHARS]}"


@dataclass(frozen=True)
class AuditEntry:
    """One appended audit row, as stored."""

    seq: int
    created_at: datetime
    event: str
    entity_type: str
    entity_id: str
    actor: str
    payload: dict[str, Any]
    prev_hash: str
    hash: str


@dataclass(frozen=True)
class Link:
    """One append's place in the chain: the hash its first row links to and its last
    row's hash. Consecutive appends with no other writer between them link up."""

    linked_to: str
    head: str


def last_append(session: Session) -> Link | None:
    """Where the latest append of ``session``'s current transaction sits in the chain;
    None before its first append."""
    remembered = session.info.get(_LINK)
    if remembered is None or remembered[0] is not _transaction(session):
        return None
    link: Link = remembered[1]
    return link


def append_event(
    session: Session,
    *,
    event: str,
    entity_type: str,
    entity_id: str,
    actor: str,
    payload: dict[str, Any],
    key: ChainKey | None,
    at: datetime | None = None,
) -> AuditEntry:
    """Append one event inside the caller's transaction and return the row it wrote.

    Call it after the transaction's other writes: on PostgreSQL it takes the chain lock,
    which is held until commit. ``key`` None writes a legacy row (tests of old logs).
    """
    fields = {"event": event, "entity_type": entity_type, "entity_id": entity_id}
    events = [{**fields, "actor": actor, "payload": payload}]
    return append_events(session, events, key=key, at=at)[0]


def append_events(
    session: Session,
    events: Sequence[dict[str, Any]],
    *,
    key: ChainKey | None,
    at: datetime | None = None,
) -> list[AuditEntry]:
    """Append several events (``event``, ``entity_type``, ``entity_id``, ``actor``,
    ``payload`` each) in order, with one executemany; the rows written.

    The same chain as one :func:`append_event` per event: each row links to the one
    before it. Call it after the transaction's other writes (see ``append_event``).
    """
    if not events:
        return []
    created_at = at or utcnow()
    connection = session.connection()
    remembered = session.info.get(_HEAD)
    if remembered is not None and remembered[0] is _transaction(session):
        # this transaction holds the chain (its lock, or SQLite's write lock) already
        entries = _chained(events, remembered[1], remembered[2], created_at, key)
    else:
        sqlite = connection.dialect.name == "sqlite"
        if not sqlite:
            session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY})
        hint = _HINTS.get(connection.engine) if sqlite else None
        if hint is not None:
            entries = _chained(events, *hint, created_at, key)
            # the guard holds for every row or for none: each links to the one before
            if connection.execute(_GUARDED_INSERT, _rows(entries)).rowcount == len(entries):
                return _written(session, entries)
        entries = _chained(events, *_read_head(session), created_at, key)
    # Core INSERTs, not ORM objects and a flush: these are on every submission's and
    # grading's path (bench/overhead.py, bench/cpu_per_grading.py)
    connection.execute(insert(_AUDIT), _rows(entries))
    return _written(session, entries)


def _chained(
    events: Sequence[dict[str, Any]],
    seq: int,
    prev_hash: str,
    created_at: datetime,
    key: ChainKey | None,
) -> list[AuditEntry]:
    """The rows of ``events``, the first numbered ``seq`` and linked to ``prev_hash``.

    KeyMismatch when ``prev_hash`` is keyed with another key than ``key``: a process
    started with another key (two started together on a fresh log, each passing the
    start-up check) never appends a row the chain's key cannot verify."""
    head_key = hash_key_id(prev_hash)
    if key is not None and head_key is not None and head_key != key.key_id:
        raise KeyMismatch(
            f"the audit log's head is keyed with key {head_key}, not with this process's "
            f"key {key.key_id}: nothing is appended; restart it with the deployment's "
            "service key (SRE_JUDGE_SECRET_KEY_FILE)"
        )
    entries = []
    for offset, event in enumerate(events):
        fields: dict[str, Any] = {
            **event,
            "seq": seq + offset,
            "created_at": created_at,
            # store exactly what is hashed: plain JSON values, as they will be read back
            "payload": json.loads(canonical_json(event["payload"])),
            "prev_hash": prev_hash,
        }
        entry = AuditEntry(**fields, hash=row_hash(**fields, key=key))
        entries.append(entry)
        prev_hash = entry.hash
    return entries


def _rows(entries: Sequence[AuditEntry]) -> list[dict[str, Any]]:
    return [vars(e) for e in entries]


def _written(session: Session, entries: list[AuditEntry]) -> list[AuditEntry]:
    """Remember the new head for the rest of the transaction and, on SQLite, as the
    engine's hint (a rolled-back append leaves a stale hint, which the guard refuses)."""
    head = (entries[-1].seq + 1, entries[-1].hash)
    transaction = _transaction(session)
    session.info[_HEAD] = (transaction, *head)
    session.info[_LINK] = (transaction, Link(entries[0].prev_hash, entries[-1].hash))
    connection = session.connection()
    if connection.dialect.name == "sqlite":
        _HINTS[connection.engine] = head
    return entries


def _guarded_insert() -> Any:
    """INSERT one audit row only when the chain's last row is the one it links to."""
    binds = {c.name: bindparam(c.name, type_=c.type) for c in _AUDIT.columns}
    last_hash = select(_AUDIT.c.hash).order_by(_AUDIT.c.seq.desc()).limit(1).scalar_subquery()
    values = select(*binds.values()).where(last_hash == binds["prev_hash"])
    return insert(_AUDIT).from_select(list(binds), values)


#: the append of a row at a hinted head (SQLite): see the module's docstring
_GUARDED_INSERT = _guarded_insert()


def _transaction(session: Session) -> object:
    """The innermost transaction: a head remembered in it is void outside it."""
    return session.get_nested_transaction() or session.get_transaction()


def _read_head(session: Session) -> tuple[int, str]:
    """The next ``seq`` and the hash it chains to, read from the table."""
    last = (
        session.execute(
            select(col(AuditRecord.seq), col(AuditRecord.hash))
            .order_by(col(AuditRecord.seq).desc())
            .limit(1)
        )
    ).first()
    return (last.seq + 1, last.hash) if last else (1, GENESIS_HASH)
