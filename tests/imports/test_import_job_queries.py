"""Import jobs in storage: one process at a time, given back at shutdown, taken over when stale."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from api.imports.job_queries import ImportJobQueries
from api.imports.runner import ImportRunner
from storage import Store
from storage.errors import NotFound
from storage.imports import ImportJobRecord
from tests.conftest import Clock

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


def _job() -> ImportJobRecord:
    return ImportJobRecord(kind="jsonl", archive="jsonl", size=3, sha256="0" * 64, created_by="a")


async def test_a_job_is_claimed_once_and_given_back_for_the_next_process(
    store: Store, clock: Clock
) -> None:
    job = await ImportJobQueries(store.db).create(_job(), b"abc")
    fresh = clock() - timedelta(minutes=5)
    claimed = await ImportJobQueries(store.db).claim("one", stale_before=fresh)
    assert claimed is not None and claimed.state == "running" and claimed.attempts == 1
    assert await ImportJobQueries(store.db).claim("two", stale_before=fresh) is None  # still alive
    assert await ImportJobQueries(store.db).upload(job.id) == b"abc"
    assert await ImportJobQueries(store.db).release(job.id, "one")  # shutdown
    again = await ImportJobQueries(store.db).claim("two", stale_before=fresh)
    assert again is not None and again.claimed_by == "two" and again.attempts == 2


async def test_a_stale_job_is_taken_over_and_its_old_process_cannot_write(
    store: Store, clock: Clock
) -> None:
    job = await ImportJobQueries(store.db).create(_job(), b"abc")
    assert await ImportJobQueries(store.db).claim("dead", stale_before=clock()) is not None
    assert await ImportJobQueries(store.db).progress(job.id, "dead", total=3, done=1)
    clock.advance(600)
    taken = await ImportJobQueries(store.db).claim(
        "next", stale_before=clock() - timedelta(minutes=5)
    )
    assert taken is not None and taken.claimed_by == "next" and taken.done == 1
    assert not await ImportJobQueries(store.db).progress(job.id, "dead", done=2)  # superseded
    await ImportJobQueries(store.db).finish(job.id, "dead", state="done")  # ignored: not its job
    assert (await ImportJobQueries(store.db).get(job.id)).state == "running"
    await ImportJobQueries(store.db).finish(job.id, "next", state="done", done=3)
    finished = await ImportJobQueries(store.db).get(job.id)
    assert finished.state == "done" and finished.done == 3 and finished.finished_at is not None
    with pytest.raises(NotFound):  # the upload of a finished job is removed
        await ImportJobQueries(store.db).upload(job.id)


async def test_a_runner_stopped_while_it_claims_a_job_gives_the_job_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that stops while its runner's claim is being written gives the job back
    (queued again, for the next start) rather than leaving it running under a process
    that is gone until its heartbeat goes stale: the claim's transaction commits all the
    same, as a cancelled caller waits for it."""
    jobs = ImportJobQueries(store.db)
    job = await jobs.create(_job(), b"{}")
    claim = ImportJobQueries._claim
    entered = asyncio.Event()
    loop = asyncio.get_running_loop()

    def slow_claim(self: Any, session: Any, worker: str, stale_before: Any) -> Any:
        loop.call_soon_threadsafe(entered.set)
        time.sleep(0.3)  # the claim's transaction, a moment long
        return claim(self, session, worker, stale_before)

    monkeypatch.setattr(ImportJobQueries, "_claim", slow_claim)
    services = SimpleNamespace(store=store, waiters=SimpleNamespace(imports=asyncio.Event()))
    runner = ImportRunner(services, poll_seconds=60)  # type: ignore[arg-type]
    runner.start()
    await asyncio.wait_for(entered.wait(), timeout=5)
    await runner.stop()  # the server shuts down meanwhile
    after = await jobs.get(job.id)
    assert (after.state, after.claimed_by, after.attempts) == ("queued", None, 1)
