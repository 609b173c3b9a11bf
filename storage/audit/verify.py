"""Checking the audit log: the keyed chain, then the gradings' state it covers.

:func:`verify_chain` walks the log in ``seq`` order in batches and names the first row
where the chain is broken: a missing or renumbered seq, a broken link, a hash that does
not match the row (edited, or rehashed without the key), a row keyed with another key,
or an unkeyed row after keyed ones (a downgrade). Rows written before the log was keyed
are checked as *legacy* rows (plain sha256) and counted; the first keyed row's HMAC
covers the last legacy hash, so an edit of any legacy row still breaks a link.

With the chain intact it recomputes every grading's state digest from the tables and
compares it with the newest digest in the chain (``storage.audit.state``). Everything
is read in one snapshot, so a live server's writes cannot make a false alarm.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from storage.audit.chain import GENESIS_HASH, ChainKey, hash_key_id, row_hash
from storage.audit.state import COVERS, answers_by_grading, state_digest
from storage.db import read_only
from storage.tables import AuditRecord, GradingRecord

__all__ = ["ChainReport", "ChainWalk", "snapshot", "verify_chain", "walk_chain"]

_BATCH = 500
_AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]
_GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]
Broken = tuple[int, str]


@dataclass(frozen=True)
class ChainReport:
    """The outcome of :func:`verify_chain`."""

    #: the chain is intact and every grading matches its state in the chain
    ok: bool
    #: rows found intact before the first break (all rows when the chain is intact)
    checked: int
    #: the first seq position where the chain is wrong (a missing seq is named too)
    first_broken_seq: int | None = None
    reason: str | None = None
    #: hash and seq of the last intact row: a checkpoint pins them outside the database
    head_hash: str = GENESIS_HASH
    head_seq: int = 0
    #: rows written before the log was keyed (plain sha256)
    legacy_rows: int = 0
    #: gradings whose digest was recomputed and compared
    gradings_checked: int = 0
    #: gradings written before the log covered state (no digest to compare)
    gradings_uncovered: int = 0
    #: what is wrong with the gradings' state, one sentence each
    state_problems: tuple[str, ...] = ()


@dataclass
class ChainWalk:
    """The state of a walk along the chain: where it is and what it has seen."""

    key: ChainKey | None
    expected_seq: int = 1
    prev_hash: str = GENESIS_HASH
    checked: int = 0
    legacy: int = 0
    keyed: bool = False
    first_keyed_at: datetime | None = None
    newest_at: datetime | None = None
    #: grading id -> the newest state digest in the chain (None: deleted)
    covered: dict[str, str | None] = field(default_factory=dict)

    def check(self, row: Any) -> Broken | None:
        """Why ``row`` breaks the chain here, or None; advances past an intact row."""
        if row.seq != self.expected_seq:
            return (
                min(row.seq, self.expected_seq),
                f"found seq {row.seq} where seq {self.expected_seq} was expected "
                "(a row was removed or renumbered)",
            )
        if row.prev_hash != self.prev_hash:
            return row.seq, "prev_hash does not match the hash of the previous row"
        broken = self._check_hash(row)
        if broken is not None:
            return row.seq, broken
        self.expected_seq, self.prev_hash = row.seq + 1, row.hash
        self.checked += 1
        if self.newest_at is None or row.created_at > self.newest_at:
            self.newest_at = row.created_at
        return None

    def _check_hash(self, row: Any) -> str | None:
        key_id = hash_key_id(row.hash)
        covers = row.payload.get(COVERS) if isinstance(row.payload, dict) else None
        if key_id is None:
            if self.keyed:
                return "an unkeyed row after keyed rows: the log was rewritten without the key"
            if covers is not None:
                return "an unkeyed row carries gradings' state: it was rewritten without the key"
            if _recompute(row, None) != row.hash:
                return "hash does not match the row's content"
            self.legacy += 1
            return None
        if self.key is None:
            return f"the row is keyed (key {key_id}) and no key was given to check it"
        if key_id != self.key.key_id:
            return (
                f"the row is keyed with key {key_id}, not with the configured key "
                f"{self.key.key_id} (a rewrite, or the wrong SRE_JUDGE_SECRET_KEY_FILE)"
            )
        if _recompute(row, self.key) != row.hash:
            return "hash does not match the row's content (edited, or rehashed without the key)"
        if not self.keyed:
            self.keyed, self.first_keyed_at = True, row.created_at
        if isinstance(covers, dict):
            self.covered.update(covers)
        return None


def _recompute(row: Any, key: ChainKey | None) -> str:
    return row_hash(
        seq=row.seq,
        created_at=row.created_at,
        event=row.event,
        entity_type=row.entity_type,
        entity_id=row.entity_id,
        actor=row.actor,
        payload=row.payload,
        prev_hash=row.prev_hash,
        key=key,
    )


async def walk_chain(
    connection: AsyncConnection, walk: ChainWalk, *, batch_size: int = _BATCH
) -> Broken | None:
    """Check the rows after ``walk.expected_seq - 1`` to the head; the first break or None."""
    last_seen = walk.expected_seq - 1
    while True:
        query = select(_AUDIT).where(_AUDIT.c.seq > last_seen).order_by(_AUDIT.c.seq)
        rows = (await connection.execute(query.limit(batch_size))).all()
        if not rows:
            return None
        for row in rows:
            broken = walk.check(row)
            if broken is not None:
                return broken
        last_seen = rows[-1].seq


@asynccontextmanager
async def snapshot(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """A read-only connection whose statements all see the same data."""
    async with read_only(engine).connect() as connection:
        if connection.dialect.name == "postgresql":
            await connection.execution_options(isolation_level="REPEATABLE READ")
        async with connection.begin():
            yield connection


async def verify_chain(
    engine: AsyncEngine, *, key: ChainKey | None, batch_size: int = _BATCH
) -> ChainReport:
    """Walk the whole log, then compare every grading with its newest state in the chain.

    ``key`` is the chain key (``ChainKey.of(service_key)``); without one only a log of
    legacy rows verifies.
    """
    walk = ChainWalk(key)
    async with snapshot(engine) as connection:
        broken = await walk_chain(connection, walk, batch_size=batch_size)
        state = _State() if broken is not None else await _check_state(connection, walk, batch_size)
    seq, reason = broken if broken is not None else (None, None)
    return ChainReport(
        ok=broken is None and not state.problems,
        checked=walk.checked,
        first_broken_seq=seq,
        reason=reason,
        head_hash=walk.prev_hash,
        head_seq=walk.expected_seq - 1,
        legacy_rows=walk.legacy,
        gradings_checked=state.checked,
        gradings_uncovered=state.uncovered,
        state_problems=tuple(state.problems),
    )


@dataclass
class _State:
    checked: int = 0
    uncovered: int = 0
    problems: list[str] = field(default_factory=list)


async def _check_state(connection: AsyncConnection, walk: ChainWalk, batch_size: int) -> _State:
    """Each grading in the tables against the newest digest the chain holds for it."""
    state, remaining, last_id = _State(), dict(walk.covered), None
    while True:
        query = select(_GRADINGS).order_by(_GRADINGS.c.id).limit(batch_size)
        if last_id is not None:
            query = query.where(_GRADINGS.c.id > last_id)
        rows = (await connection.execute(query)).all()
        if not rows:
            break
        answers = await answers_by_grading(connection, [r.id for r in rows])
        for row in rows:
            _compare(state, walk, row, answers.get(row.id, ()), remaining)
        last_id = rows[-1].id
    for grading_id, digest in remaining.items():
        if digest is not None:
            state.problems.append(
                f"grading {grading_id} is in the audit log but missing from the gradings table"
            )
    return state


def _compare(
    state: _State, walk: ChainWalk, row: Any, answers: Any, remaining: dict[str, str | None]
) -> None:
    if row.id in remaining:
        state.checked += 1
        if remaining.pop(row.id) != state_digest(row, answers):
            state.problems.append(
                f"grading {row.id} differs from its newest state in the audit log "
                "(its row or answers were edited, or the newest audit rows deleted)"
            )
        return
    newer_than_keys = walk.first_keyed_at is not None and row.created_at >= walk.first_keyed_at
    newer_than_log = walk.newest_at is None or row.created_at > walk.newest_at
    if newer_than_keys or newer_than_log:
        state.problems.append(
            f"grading {row.id} has no state in the audit log "
            "(the audit rows that covered it were deleted)"
        )
    else:
        state.uncovered += 1
