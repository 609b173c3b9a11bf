"""Checking the audit log: the keyed chain, then the gradings' state it covers.

:func:`verify_chain` walks the log in ``seq`` order in batches and names the first row
where the chain is broken: a missing or renumbered seq, a broken link, a hash that does
not match the row (edited, or rehashed without the key), a row keyed with another key,
or an unkeyed row after keyed ones (a downgrade). Rows written before the log was keyed
are checked as *legacy* rows (plain sha256) and counted; the first keyed row's HMAC
covers the last legacy hash, so an edit of any legacy row still breaks a link.

With the chain intact it recomputes every grading's state digest from the tables and
compares it with the newest digest in the chain (``storage.audit.state``), then does
the same for every evidentiary record (``storage.audit.records``), naming the table,
the row and the columns that differ. Everything is read in one snapshot, so a live
server's writes cannot make a false alarm. The check is synchronous (:func:`check_chain`);
:func:`verify_chain` runs it in a worker thread for async callers.

A keyed log holds no unexplained legacy rows and no uncovered rows: legacy rows count
as adopted only when a keyed ``audit.backfilled`` event states exactly their number,
and gradings or records written before the log covered them count as covered only once
such an event carries their digests (``storage.audit.backfill``). Otherwise ``verify``
fails, saying so: a log rewritten wholesale into the unkeyed form, its digests
stripped, is no longer told apart from an old one only by a checkpoint.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.orm import Session

from storage.audit.chain import GENESIS_HASH, ChainKey, hash_key_id, row_hash
from storage.audit.records import (
    COVERED_TABLES,
    ROWS,
    changed_fields,
    record_digest,
    record_key,
    table_rows,
)
from storage.audit.state import COVERS, answers_by_grading, state_digest
from storage.engine import read_only
from storage.tables import AuditRecord, GradingRecord

__all__ = [
    "BACKFILL_EVENT",
    "LEGACY_ROWS",
    "ChainReport",
    "ChainWalk",
    "check_chain",
    "snapshot",
    "verify_chain",
    "walk_chain",
]

#: the event that adopts legacy rows and covers rows written before the log covered them
BACKFILL_EVENT = "audit.backfilled"
#: the payload key of the number of legacy rows a backfill event adopts
LEGACY_ROWS = "legacy_rows"

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
    #: what is wrong with the gradings' and records' state, one sentence each
    state_problems: tuple[str, ...] = ()
    #: evidentiary records (``storage.audit.records``) whose digest was compared
    records_checked: int = 0
    #: records written before the log covered them (no digest to compare)
    records_uncovered: int = 0
    #: the legacy rows were adopted by a keyed backfill event
    legacy_adopted: bool = False


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
    #: table -> row key -> the newest record digest in the chain
    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: when the chain first carried a record digest (rows created before may be uncovered)
    records_since: datetime | None = None
    #: the number of legacy rows a keyed backfill event adopted
    adopted_legacy: int | None = None

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
        payload = row.payload if isinstance(row.payload, dict) else {}
        covers, records = payload.get(COVERS), payload.get(ROWS)
        if key_id is None:
            if self.keyed:
                return "an unkeyed row after keyed rows: the log was rewritten without the key"
            if covers is not None or records is not None or row.event == BACKFILL_EVENT:
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
        if isinstance(records, dict):
            self._add_records(records, row.created_at)
        legacy = payload.get(LEGACY_ROWS)
        if row.event == BACKFILL_EVENT and isinstance(legacy, int):
            self.adopted_legacy = legacy
        return None

    def predates_grading_state(self, created_at: datetime) -> bool:
        """A grading created then, with no state in the chain, predates the covering of
        gradings (so it is uncovered, not stripped of its audit rows)."""
        newer_than_keys = self.first_keyed_at is not None and created_at >= self.first_keyed_at
        return not newer_than_keys and not self._newer_than_log(created_at)

    def predates_record_state(self, created_at: datetime | None) -> bool:
        """The same for a record (``storage.audit.records``) created then."""
        if created_at is None:
            return False
        newer_than_coverage = self.records_since is not None and created_at >= self.records_since
        return not newer_than_coverage and not self._newer_than_log(created_at)

    def _newer_than_log(self, created_at: datetime) -> bool:
        return self.newest_at is None or created_at > self.newest_at

    def _add_records(self, records: dict[str, Any], at: datetime) -> None:
        if self.records_since is None:
            self.records_since = at
        for table, digests in records.items():
            if isinstance(digests, dict):
                self.records.setdefault(table, {}).update(digests)


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


#: what serialising or reading an edited value raises (NaN, a lone surrogate, a time
#: that is none): reported as the row's problem, never raised from a verification
_UNREADABLE = (ValueError, UnicodeError, TypeError, OverflowError)


def walk_chain(
    connection: Connection | Session, walk: ChainWalk, *, batch_size: int = _BATCH
) -> Broken | None:
    """Check the rows after ``walk.expected_seq - 1`` to the head; the first break or None.

    From the start (``expected_seq`` 1) every row is read, a seq of 0 or below included:
    a row slipped in before the first would otherwise be in the log and never checked.
    """
    last_seen = walk.expected_seq - 1
    while True:
        query = select(_AUDIT).order_by(_AUDIT.c.seq)
        if last_seen > 0:
            query = query.where(_AUDIT.c.seq > last_seen)
        try:
            rows = connection.execute(query.limit(batch_size)).all()
        except _UNREADABLE:  # e.g. a created_at no driver reads as a time: which row?
            return _unreadable_row(connection, query.limit(batch_size))
        if not rows:
            return None
        for row in rows:
            try:
                broken = walk.check(row)
            except _UNREADABLE as exc:  # a value no digest can hold: an edit, named
                return row.seq, f"the row holds a value that cannot be read: {exc}"
            if broken is not None:
                return broken
        last_seen = rows[-1].seq


def _unreadable_row(connection: Connection | Session, query: Any) -> Broken:
    """The first row of ``query`` (a batch that could not be read) that cannot be read
    alone, and why."""
    seqs = connection.execute(query.with_only_columns(_AUDIT.c.seq)).scalars().all()
    for seq in seqs:
        try:
            connection.execute(select(_AUDIT).where(_AUDIT.c.seq == seq)).one()
        except _UNREADABLE as exc:
            return seq, f"the row holds a value that cannot be read: {exc}"
    return (seqs[0] if seqs else 0), "a row cannot be read"


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """A read-only connection whose statements all see the same data."""
    with read_only(engine).connect() as connection:
        if connection.dialect.name == "postgresql":
            connection.execution_options(isolation_level="REPEATABLE READ")
        with connection.begin():
            yield connection


async def verify_chain(
    engine: Engine, *, key: ChainKey | None, batch_size: int = _BATCH
) -> ChainReport:
    """:func:`check_chain` in a worker thread, so the event loop never waits for it."""
    return await asyncio.to_thread(check_chain, engine, key=key, batch_size=batch_size)


def check_chain(engine: Engine, *, key: ChainKey | None, batch_size: int = _BATCH) -> ChainReport:
    """Walk the whole log, then compare every grading with its newest state in the chain.

    ``key`` is the chain key (``ChainKey.of(service_key)``); without one only a log of
    legacy rows verifies. It reads in one snapshot and blocks: from async code use
    :func:`verify_chain`.
    """
    walk = ChainWalk(key)
    with snapshot(engine) as connection:
        broken = walk_chain(connection, walk, batch_size=batch_size)
        state = _State()
        if broken is None:
            _check_state(connection, walk, batch_size, state)
            _check_records(connection, walk, batch_size, state)
            state.problems.extend(_coverage_problems(walk, state))
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
        records_checked=state.records_checked,
        records_uncovered=state.records_uncovered,
        legacy_adopted=walk.legacy > 0 and walk.adopted_legacy == walk.legacy,
    )


@dataclass
class _State:
    checked: int = 0
    uncovered: int = 0
    problems: list[str] = field(default_factory=list)
    records_checked: int = 0
    records_uncovered: int = 0


def _coverage_problems(walk: ChainWalk, state: _State) -> list[str]:
    """Legacy rows nobody adopted and rows the chain does not cover, as problems."""
    problems = []
    if walk.legacy and walk.adopted_legacy != walk.legacy:
        adopted = "none" if walk.adopted_legacy is None else str(walk.adopted_legacy)
        problems.append(
            f"{walk.legacy} legacy rows (unkeyed) and no keyed backfill adopting them "
            f"(adopted: {adopted}): an old log not yet adopted with `sre-judge audit "
            "backfill`, or a log rewritten without the key"
        )
    if state.uncovered or state.records_uncovered:
        problems.append(
            f"{state.uncovered} gradings and {state.records_uncovered} records written "
            "before the audit log covered them carry no digest: cover them with "
            "`sre-judge audit backfill` (it adopts them as they now stand)"
        )
    return problems


def _check_records(connection: Connection, walk: ChainWalk, batch_size: int, state: _State) -> None:
    """Each evidentiary record against the newest digest the chain holds for it."""
    for name, table in COVERED_TABLES.items():
        remaining = dict(walk.records.get(name, {}))
        for rows in table_rows(connection, table, batch_size=batch_size):
            for row in rows:
                try:
                    _compare_record(state, walk, name, row, remaining)
                except _UNREADABLE as exc:
                    key = record_key(table, row._mapping)
                    remaining.pop(key, None)
                    state.problems.append(f"{name} {key} holds a value that cannot be read: {exc}")
        for key in remaining:
            state.problems.append(
                f"{name} {key} is in the audit log but missing from the {name} table "
                "(the row was deleted)"
            )


def _compare_record(
    state: _State, walk: ChainWalk, name: str, row: Any, remaining: dict[str, Any]
) -> None:
    table = COVERED_TABLES[name]
    values = row._mapping
    key = record_key(table, values)
    stored = remaining.pop(key, None)
    if stored is not None:
        state.records_checked += 1
        current = record_digest(table, values)
        if not isinstance(stored, dict) or stored.get("sha") != current["sha"]:
            fields = changed_fields(stored, current)
            which = f" in {', '.join(fields)}" if fields else ""
            state.problems.append(
                f"{name} {key} differs{which} from its newest state in the audit log "
                "(the row was edited, or the newest audit rows deleted)"
            )
        return
    if not walk.predates_record_state(values.get("created_at")):
        state.problems.append(
            f"{name} {key} has no state in the audit log (written around the log, or the "
            "audit rows that covered it were deleted)"
        )
    else:
        state.records_uncovered += 1


def _check_state(connection: Connection, walk: ChainWalk, batch_size: int, state: _State) -> None:
    """Each grading in the tables against the newest digest the chain holds for it."""
    remaining, last_id = dict(walk.covered), None
    while True:
        query = select(_GRADINGS).order_by(_GRADINGS.c.id).limit(batch_size)
        if last_id is not None:
            query = query.where(_GRADINGS.c.id > last_id)
        rows = connection.execute(query).all()
        if not rows:
            break
        answers = answers_by_grading(connection, [r.id for r in rows])
        for row in rows:
            try:
                _compare(state, walk, row, answers.get(row.id, ()), remaining)
            except _UNREADABLE as exc:
                remaining.pop(row.id, None)
                state.problems.append(f"grading {row.id} holds a value that cannot be read: {exc}")
        last_id = rows[-1].id
    for grading_id, digest in remaining.items():
        if digest is not None:
            state.problems.append(
                f"grading {grading_id} is in the audit log but missing from the gradings table"
            )


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
    if not walk.predates_grading_state(row.created_at):
        state.problems.append(
            f"grading {row.id} has no state in the audit log "
            "(the audit rows that covered it were deleted)"
        )
    else:
        state.uncovered += 1
