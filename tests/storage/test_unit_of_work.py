"""One use case, one transaction: ``Database.run`` commits whole or not at all, in a
worker thread, and never makes the event loop wait for the database."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from storage import AuditRecord, Store


def _audit(store: Store, session: Session, entity_id: str) -> None:
    store.db.audit(
        session, "test.event", entity_type="thing", entity_id=entity_id, actor="t", payload={}
    )


def _events(session: Session) -> int:
    return session.execute(select(func.count()).select_from(AuditRecord)).scalar_one()


async def test_a_use_case_commits_when_it_returns_and_writes_nothing_when_it_raises(
    store: Store,
) -> None:
    before = await store.db.run_read(_events)

    def fails(session: Session) -> None:
        _audit(store, session, "lost")
        raise ValueError("refused after writing")

    with pytest.raises(ValueError, match="refused after writing"):
        await store.db.run(fails)
    assert await store.db.run_read(_events) == before

    await store.db.run(lambda session: _audit(store, session, "kept"))
    assert await store.db.run_read(_events) == before + 1


async def test_writers_of_one_process_take_turns_and_lose_no_update(store: Store) -> None:
    """Read-then-write use cases run at once: the chain stays whole (no seq taken twice)."""
    await asyncio.gather(
        *(store.db.run(lambda s, n=n: _audit(store, s, f"t{n}")) for n in range(20))
    )
    seqs = await store.db.run_read(
        lambda s: list(s.execute(select(AuditRecord.seq).order_by(AuditRecord.seq)).scalars())
    )
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 20


async def test_a_database_busy_with_another_writer_blocks_a_thread_not_the_event_loop(
    store: Store, database_url: str, db_backend: str
) -> None:
    if db_backend != "sqlite":
        pytest.skip("SQLite's one writer; PostgreSQL writers wait on row locks only")
    path = database_url.split("///", 1)[1]
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process's writer holds the lock
    try:
        write = asyncio.create_task(store.db.run(lambda s: _audit(store, s, "waits")))
        ticks, started = 0, time.monotonic()
        while time.monotonic() - started < 0.4:
            await asyncio.sleep(0.01)
            ticks += 1
        assert not write.done()  # still waiting for the other writer
        assert ticks >= 20  # ... while the loop went on serving others
    finally:
        other.execute("COMMIT")
        other.close()
    await asyncio.wait_for(write, timeout=10)


async def test_a_caller_cancelled_again_and_again_still_waits_for_its_transaction(
    store: Store,
) -> None:
    """A stop cancels a task again while it runs on (a cancellation can be lost on its
    way); the repeated cancellations do not cut the wait short: the caller returns only
    once its transaction has ended."""
    entered, order = threading.Event(), []

    def slow(session: Session) -> None:
        entered.set()
        time.sleep(0.4)
        _audit(store, session, "slow")
        order.append("slow committed")

    task = asyncio.create_task(store.db.run(slow))
    await asyncio.to_thread(entered.wait, 5)
    for _ in range(3):
        task.cancel()
        await asyncio.sleep(0.05)
    with pytest.raises(asyncio.CancelledError):
        await task
    assert order == ["slow committed"]


async def test_a_cancelled_caller_still_lets_its_transaction_end_first(
    store: Store, db_backend: str
) -> None:
    """Cancelling the awaiting task does not tear the transaction in half, nor (on
    SQLite, one writer at a time) let the next writer in while it runs."""
    entered, order = threading.Event(), []

    def slow(session: Session) -> None:
        entered.set()
        time.sleep(0.3)
        _audit(store, session, "slow")
        order.append("slow committed")

    before = await store.db.run_read(_events)
    task = asyncio.create_task(store.db.run(slow))
    await asyncio.to_thread(entered.wait, 5)
    task.cancel()
    follower = asyncio.create_task(
        store.db.run(lambda s: (_audit(store, s, "next"), order.append("next ran")))
    )
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "slow committed" in order  # the cancelled caller returned after its commit
    await follower
    assert await store.db.run_read(_events) == before + 2
    if db_backend == "sqlite":
        assert order == ["slow committed", "next ran"]
    else:  # PostgreSQL writers run side by side
        assert sorted(order) == ["next ran", "slow committed"]
