"""The audit hash chain: verify passes, and tampering with any column of any row is caught.

The nine tamper kinds of issue 19 are in ``test_audit_tamper.py``; legacy (unkeyed) logs
in ``test_audit_legacy.py``; checkpoints in ``test_audit_checkpoint.py``.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any

import pytest
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Engine

from storage import GENESIS_HASH, AuditRecord, Store, append_event, verify_chain
from storage.audit import ChainKey, row_hash
from storage.canonical import canonical_json
from storage.engine import make_engine, session_factory
from storage.keys import ServiceKey
from tests.storage.helpers import graded_result, submit
from tests.support.statements import statements

pytestmark = pytest.mark.tampers

AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]
ROWS = 6


async def _fill(store: Store) -> None:
    """Six audit rows: submission, rubric, judge call, verdict, token, scenario."""
    outcome = await submit(store)
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    await store.queue.complete(outcome.grading.id, "w", graded_result())
    await store.tokens.create(name="ci", role="submitter")
    await store.catalog.create_scenario(id="s1", ground_truth="gt", actor="admin")


async def _rows(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        return list(connection.execute(select(AUDIT).order_by(AUDIT.c.seq)))


async def test_an_empty_log_verifies(engine: Engine) -> None:
    report = await verify_chain(engine, key=ChainKey.of(ServiceKey.ephemeral()))
    assert report.ok and report.checked == 0 and report.head_hash == GENESIS_HASH


async def test_the_chain_links_every_row_and_verifies(store: Store, engine: Engine) -> None:
    await _fill(store)
    rows = await _rows(engine)
    assert [r.seq for r in rows] == list(range(1, ROWS + 1))
    assert rows[0].prev_hash == GENESIS_HASH
    assert all(b.prev_hash == a.hash for a, b in pairwise(rows))
    assert {r.event for r in rows} >= {"submission.received", "grading.completed"}
    report = await verify_chain(engine, key=store.db.chain_key, batch_size=4)  # two batches
    assert report.ok and report.checked == ROWS and report.first_broken_seq is None
    assert report.head_hash == rows[-1].hash and report.head_seq == ROWS
    assert report.legacy_rows == 0 and report.gradings_checked == 1
    assert all(r.hash.startswith(f"k:{store.db.chain_key.key_id}:") for r in rows)
    assert all(len(r.hash) == 64 for r in rows)


def _tampered(column: str, row: Any) -> Any:
    values: dict[str, Any] = {
        "seq": row.seq + 1000,
        "created_at": row.created_at + timedelta(microseconds=1),
        "event": row.event + "x",
        "entity_type": row.entity_type + "x",
        "entity_id": row.entity_id + "x",
        "actor": row.actor + "x",
        "payload": {**row.payload, "tampered": True},
        "prev_hash": "f" * 64,
        "hash": "e" * 64,
    }
    return values[column]


COLUMNS = [
    "seq",
    "created_at",
    "event",
    "entity_type",
    "entity_id",
    "actor",
    "payload",
    "prev_hash",
    "hash",
]


@pytest.mark.parametrize("column", COLUMNS)
async def test_tampering_any_column_of_any_row_is_detected(
    store: Store, engine: Engine, column: str
) -> None:
    await _fill(store)
    rows = await _rows(engine)
    for row in rows:
        with engine.begin() as connection:
            connection.execute(
                update(AUDIT).where(AUDIT.c.seq == row.seq).values({column: _tampered(column, row)})
            )
        report = await verify_chain(engine, key=store.db.chain_key, batch_size=4)
        assert not report.ok, f"{column} of row {row.seq}"
        assert report.first_broken_seq == row.seq, report.reason
        assert report.checked == row.seq - 1
        # restore the row so the next one is tampered alone
        with engine.begin() as connection:
            tampered_seq = row.seq + 1000 if column == "seq" else row.seq
            connection.execute(
                update(AUDIT).where(AUDIT.c.seq == tampered_seq).values(dict(row._mapping))
            )
        assert (await verify_chain(engine, key=store.db.chain_key)).ok


async def test_a_deleted_row_is_named(store: Store, engine: Engine) -> None:
    await _fill(store)
    with engine.begin() as connection:
        connection.execute(delete(AUDIT).where(AUDIT.c.seq == 3))
    report = await verify_chain(engine, key=store.db.chain_key)
    assert (report.ok, report.first_broken_seq, report.checked) == (False, 3, 2)
    assert "removed" in (report.reason or "")


@pytest.mark.parametrize("seq", [0, -5])
async def test_a_row_slipped_in_before_the_first_is_named(
    store: Store, engine: Engine, seq: int
) -> None:
    """A forged row numbered below the first is in the log (a grading's history shows
    it): verify reads it and fails there."""
    await _fill(store)
    first = (await _rows(engine))[0]
    with engine.begin() as connection:
        connection.execute(AUDIT.insert().values({**dict(first._mapping), "seq": seq}))
    report = await verify_chain(engine, key=store.db.chain_key)
    assert (report.ok, report.first_broken_seq, report.checked) == (False, seq, 0)


async def test_concurrent_appends_never_fork_the_chain(store: Store, engine: Engine) -> None:
    await asyncio.gather(*(submit(store) for _ in range(12)))
    await asyncio.gather(*(store.tokens.create(name=f"t{i}", role="submitter") for i in range(8)))
    report = await verify_chain(engine, key=store.db.chain_key)
    assert report.ok and report.checked == 12 + 1 + 8  # + the rubric version, saved once


def _append(engine: Engine, key: ChainKey, what: str, *, commit: bool = True) -> Any:
    """Append one event through ``engine`` in a transaction of its own."""
    with session_factory(engine)() as session:
        with session.begin():
            record = append_event(
                session,
                event="test.event",
                entity_type="thing",
                entity_id=what,
                actor="me",
                payload={"what": what},
                key=key,
            )
            if not commit:
                session.rollback()
        return record


def test_appends_of_two_engines_on_one_database_interleave_without_a_fork(
    engine: Engine, database_url: str
) -> None:
    # each engine remembers the head it last wrote (on SQLite, to skip reading it); the
    # other engine's appends make that memory stale, and a stale head must never be used
    key = ChainKey.of(ServiceKey.ephemeral())
    other = make_engine(database_url)
    try:
        order = [engine, engine, other, engine, other, other, engine]
        written = [_append(e, key, f"e{n}") for n, e in enumerate(order)]
    finally:
        other.dispose()
    assert [r.seq for r in written] == list(range(1, len(order) + 1))
    rows = asyncio.run(_rows(engine))
    assert [r.entity_id for r in rows] == [f"e{n}" for n in range(len(order))]
    assert all(b.prev_hash == a.hash for a, b in pairwise(rows))
    assert asyncio.run(verify_chain(engine, key=key)).ok


def test_a_rolled_back_append_is_not_linked_to(engine: Engine) -> None:
    key = ChainKey.of(ServiceKey.ephemeral())
    kept = _append(engine, key, "kept")
    _append(engine, key, "rolled back", commit=False)
    after = _append(engine, key, "after")
    assert (after.seq, after.prev_hash) == (kept.seq + 1, kept.hash)
    assert asyncio.run(verify_chain(engine, key=key)).ok


def test_an_sqlite_append_after_the_engines_own_does_not_read_the_head(
    engine: Engine,
) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL reads the head under its advisory lock")
    key = ChainKey.of(ServiceKey.ephemeral())
    _append(engine, key, "first")  # reads the head: the engine has written nothing yet
    with statements(engine) as sent:
        _append(engine, key, "second")
    # one statement touches the log, the guarded INSERT, after SQLite's BEGIN
    touching = [statement for statement in sent if "audit_log" in statement]
    assert len(touching) == 1 and touching[0].startswith("INSERT INTO audit_log"), sent
    assert len(sent) == 2, sent


async def test_append_event_hashes_every_column_with_the_key(engine: Engine) -> None:
    key = ChainKey.of(ServiceKey.ephemeral())
    with session_factory(engine)() as session, session.begin():
        record = append_event(
            session,
            event="test.event",
            entity_type="thing",
            entity_id="t1",
            actor="me",
            payload={"b": [1, 2], "a": "é"},
            key=key,
        )
    assert record.seq == 1 and record.prev_hash == GENESIS_HASH
    fields: dict[str, Any] = {
        "seq": 1,
        "created_at": record.created_at,
        "event": "test.event",
        "entity_type": "thing",
        "entity_id": "t1",
        "actor": "me",
        "payload": {"a": "é", "b": [1, 2]},
        "prev_hash": GENESIS_HASH,
    }
    assert record.hash == row_hash(**fields, key=key)
    assert row_hash(**{**fields, "seq": 2}, key=key) != record.hash
    # neither plain sha256 nor another key gives the same hash
    assert row_hash(**fields, key=None) != record.hash
    assert row_hash(**fields, key=ChainKey.of(ServiceKey.ephemeral())) != record.hash


def test_canonical_json_is_sorted_compact_utf8_with_utc_microseconds() -> None:
    local = datetime(2025, 1, 2, 5, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    assert canonical_json({"b": 1, "a": ["é", local]}) == (
        '{"a":["é","2025-01-02T03:04:05.000000+00:00"],"b":1}'
    )
    with pytest.raises(ValueError, match="naive"):
        canonical_json({"at": datetime(2025, 1, 1)})
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_json({"x": float("nan")})
