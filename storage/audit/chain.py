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
takes (see ``storage.db``). ``seq`` is the primary key, so even a writer that bypassed
the lock could not fork the chain, only fail.

No code path updates or deletes audit rows.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, text
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
    "append_event",
    "append_events",
    "hash_key_id",
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
_AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class ChainKey:
    """The audit chain's HMAC key and the short key id written into every keyed hash."""

    mac_key: bytes
    key_id: str

    @classmethod
    def of(cls, key: ServiceKey) -> ChainKey:
        """The chain key derived from the service key (purpose ``"audit"``)."""
        return cls(mac_key=key.derive("audit"), key_id=key.key_id[:_KID_CHARS])


def hash_key_id(value: str) -> str | None:
    """The key id of a keyed hash, or None for a legacy (plain sha256) hash."""
    if not value.startswith(KEYED_PREFIX):
        return None
    return value[len(KEYED_PREFIX) : len(KEYED_PREFIX) + _KID_CHARS]


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
    seq, prev_hash = _chain_head(session)
    created_at = at or utcnow()
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
    # Core INSERTs, not ORM objects and a flush: these are on every submission's and
    # grading's path (bench/overhead.py, bench/cpu_per_grading.py)
    session.connection().execute(insert(_AUDIT), [vars(e) for e in entries])
    session.info[_HEAD] = (_transaction(session), seq + len(entries), prev_hash)
    return entries


def _transaction(session: Session) -> object:
    """The innermost transaction: a head remembered in it is void outside it."""
    return session.get_nested_transaction() or session.get_transaction()


def _chain_head(session: Session) -> tuple[int, str]:
    """The next ``seq`` and the hash it chains to; takes the chain lock on PostgreSQL.

    Read from the table once per transaction; later appends of the same transaction
    (which holds the lock, or SQLite's write lock, until it ends) continue from the
    row the previous one wrote.
    """
    remembered = session.info.get(_HEAD)
    if remembered is not None and remembered[0] is _transaction(session):
        return remembered[1], remembered[2]
    if session.connection().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY})
    last = (
        session.execute(
            select(col(AuditRecord.seq), col(AuditRecord.hash))
            .order_by(col(AuditRecord.seq).desc())
            .limit(1)
        )
    ).first()
    return (last.seq + 1, last.hash) if last else (1, GENESIS_HASH)
