"""Import jobs in storage: one process at a time, given back at shutdown, taken over when stale."""

from __future__ import annotations

from datetime import timedelta

import pytest

from api.imports.job_queries import ImportJobQueries
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
