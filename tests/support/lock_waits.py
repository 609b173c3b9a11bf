"""Two PostgreSQL transactions met at a chosen point: one held just before it audits,
the other let run until it waits on a lock."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import psycopg
import pytest

import storage.audit
from storage import Store
from tests.conftest import POSTGRES_ADMIN_URL

__all__ = ["AuditGate", "race_at_audit", "wait_for_lock_waiter"]


def _lock_waiters(store: Store) -> int:
    """How many backends of the store's database wait on a heavyweight lock."""
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
            (store.db.engine.url.database,),
        ).fetchone()
    return int(row[0]) if row else 0


def wait_for_lock_waiter(
    store: Store, done: Callable[[], bool], seconds: float = 5, *, count: int = 1
) -> None:
    """Return once ``count`` backends of the store's database wait on a lock, or
    ``done()``, or after ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end and not done():
        if _lock_waiters(store) >= count:
            time.sleep(0.1)
            return
        time.sleep(0.02)


class AuditGate:
    """Holds a transaction just before it appends an audit event named ``event`` until
    ``go`` is set (``arrived`` is set when it gets there); wraps
    ``storage.database.append_events``, its behaviour otherwise unchanged."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, event: str) -> None:
        """Gate the appends of ``event`` from now on (undone with ``monkeypatch``)."""
        self.arrived = threading.Event()
        self.go = threading.Event()
        real = storage.audit.append_events

        def gated(session: Any, events: Sequence[dict[str, Any]], **kw: Any) -> Any:
            if any(e["event"] == event for e in events) and not self.go.is_set():
                self.arrived.set()
                self.go.wait(30)
            return real(session, events, **kw)

        monkeypatch.setattr("storage.database.append_events", gated)


async def race_at_audit(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    event: str,
    first: Awaitable[Any],
    second: Callable[[], Awaitable[Any]],
) -> list[Any]:
    """Run ``first`` until it is about to append ``event`` (its row locks taken), then
    ``second()`` until it waits on a lock, then let ``first`` go on; both results, in
    that order. Fails naming the error when either transaction failed (a deadlock
    PostgreSQL ended by aborting one of them)."""
    gate = AuditGate(monkeypatch, event)
    held = asyncio.ensure_future(first)
    assert await asyncio.to_thread(gate.arrived.wait, 10), (
        f"the first never reached its {event} audit"
    )
    other = asyncio.ensure_future(second())
    await asyncio.to_thread(wait_for_lock_waiter, store, other.done)
    gate.go.set()
    results = await asyncio.gather(held, other, return_exceptions=True)
    failed = [r for r in results if isinstance(r, BaseException)]
    assert not failed, f"one transaction failed: {failed[0]!r}"
    return list(results)
