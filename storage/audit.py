"""The append-only audit log: a hash chain over every row.

Each row's ``hash`` is ``sha256(prev_hash + canonical_json(row))`` where the JSON holds
every other column (``seq``, ``created_at``, ``event``, ``entity_type``, ``entity_id``,
``actor``, ``payload``), so changing any field of any row, ``seq`` included, breaks
that row's hash or the link to it. ``seq`` is assigned as last + 1 while the chain is
locked: on PostgreSQL by a transaction-scoped advisory lock, on SQLite by the write
lock that ``BEGIN IMMEDIATE`` takes (see ``storage.db``). ``seq`` is the primary key,
so even a writer that bypassed the lock could not fork the chain, only fail.

No code path updates or deletes audit rows. :func:`verify_chain` walks the log in
``seq`` order in batches and names the first row where the chain is broken.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession
from sqlmodel import col

from storage.canonical import canonical_json, iso_utc, sha256_hex, utcnow
from storage.db import read_only
from storage.tables import AuditRecord

__all__ = [
    "AUDIT_LOCK_KEY",
    "GENESIS_HASH",
    "AuditEntry",
    "ChainReport",
    "append_event",
    "row_hash",
    "verify_chain",
]

#: ``prev_hash`` of the first row
GENESIS_HASH = "0" * 64
#: the PostgreSQL advisory lock that serializes appends (ASCII "srejudge")
AUDIT_LOCK_KEY = 0x7372656A75646765
_BATCH = 500
#: ``session.info`` key of the chain head this transaction last wrote
_HEAD = "sre_judge_audit_head"
_AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]


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
) -> str:
    """The hash of one audit row: covers every column but ``hash`` itself."""
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
    return sha256_hex(prev_hash + content)


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


async def append_event(
    session: AsyncSession,
    *,
    event: str,
    entity_type: str,
    entity_id: str,
    actor: str,
    payload: dict[str, Any],
    at: datetime | None = None,
) -> AuditEntry:
    """Append one event inside the caller's transaction and return the row it wrote.

    Call it after the transaction's other writes: on PostgreSQL it takes the chain lock,
    which is held until commit.
    """
    seq, prev_hash = await _chain_head(session)
    # store exactly what is hashed: plain JSON values, as they will be read back
    stored_payload = json.loads(canonical_json(payload))
    fields: dict[str, Any] = {
        "seq": seq,
        "created_at": at or utcnow(),
        "event": event,
        "entity_type": entity_type,
        "entity_id": entity_id,
        "actor": actor,
        "payload": stored_payload,
        "prev_hash": prev_hash,
    }
    entry = AuditEntry(**fields, hash=row_hash(**fields))
    # a Core INSERT, not an ORM object and a flush: one of these per event is on every
    # submission's and grading's path (bench/overhead.py)
    await session.execute(insert(_AUDIT), [vars(entry)])
    session.info[_HEAD] = (_transaction(session), seq + 1, entry.hash)
    return entry


def _transaction(session: AsyncSession) -> object:
    """The innermost transaction: a head remembered in it is void outside it."""
    return session.get_nested_transaction() or session.get_transaction()


async def _chain_head(session: AsyncSession) -> tuple[int, str]:
    """The next ``seq`` and the hash it chains to; takes the chain lock on PostgreSQL.

    Read from the table once per transaction; later appends of the same transaction
    (which holds the lock, or SQLite's write lock, until it ends) continue from the
    row the previous one wrote.
    """
    remembered = session.info.get(_HEAD)
    if remembered is not None and remembered[0] is _transaction(session):
        return remembered[1], remembered[2]
    connection = await session.connection()
    if connection.dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": AUDIT_LOCK_KEY})
    last = (
        await session.execute(
            select(col(AuditRecord.seq), col(AuditRecord.hash))
            .order_by(col(AuditRecord.seq).desc())
            .limit(1)
        )
    ).first()
    return (last.seq + 1, last.hash) if last else (1, GENESIS_HASH)


@dataclass(frozen=True)
class ChainReport:
    """The outcome of :func:`verify_chain`."""

    ok: bool
    #: rows found intact before the first break (all rows when ok)
    checked: int
    #: the first seq position where the chain is wrong (a missing seq is named too)
    first_broken_seq: int | None = None
    reason: str | None = None
    #: hash of the last intact row: keep it elsewhere to detect truncation later
    head_hash: str = GENESIS_HASH


def _check_row(row: Any, expected_seq: int, prev_hash: str) -> tuple[int, str] | None:
    if row.seq != expected_seq:
        return (
            min(row.seq, expected_seq),
            f"found seq {row.seq} where seq {expected_seq} was expected "
            "(a row was removed or renumbered)",
        )
    if row.prev_hash != prev_hash:
        return row.seq, "prev_hash does not match the hash of the previous row"
    recomputed = row_hash(
        seq=row.seq,
        created_at=row.created_at,
        event=row.event,
        entity_type=row.entity_type,
        entity_id=row.entity_id,
        actor=row.actor,
        payload=row.payload,
        prev_hash=row.prev_hash,
    )
    if recomputed != row.hash:
        return row.seq, "hash does not match the row's content"
    return None


async def verify_chain(engine: AsyncEngine, *, batch_size: int = _BATCH) -> ChainReport:
    """Walk the whole log in seq order, ``batch_size`` rows at a time."""
    columns = AuditRecord.__table__.c  # type: ignore[attr-defined]
    expected_seq, prev_hash, checked = 1, GENESIS_HASH, 0
    async with read_only(engine).connect() as connection:
        last_seen: int | None = None
        while True:
            query = select(*columns).order_by(columns.seq).limit(batch_size)
            if last_seen is not None:
                query = query.where(columns.seq > last_seen)
            rows = (await connection.execute(query)).all()
            if not rows:
                return ChainReport(ok=True, checked=checked, head_hash=prev_hash)
            for row in rows:
                broken = _check_row(row, expected_seq, prev_hash)
                if broken is not None:
                    seq, reason = broken
                    return ChainReport(
                        ok=False,
                        checked=checked,
                        first_broken_seq=seq,
                        reason=reason,
                        head_hash=prev_hash,
                    )
                expected_seq, prev_hash, checked = row.seq + 1, row.hash, checked + 1
            last_seen = rows[-1].seq
