"""The cache-hit fast path of regrades: the same gradings as the usual path, in batches."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.grading.regrade_fast import FastRegrade, _SharedLookup
from api.grading.workers import GradingWorkers
from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.service.services import Services
from judge.backends.scripted import ScriptedBackend
from storage import Claim, FinishedGrading, Store, verify_chain
from storage.keys import ServiceKey
from storage.queue import QueueRepository
from tests.api.conftest import ClientFactory
from tests.grading.test_internal_error import DROPPED, _metric
from tests.regrade.test_regrade_api import NEW_JUDGE, _finished
from tests.storage.helpers import sregym_rubric
from tests.support.audit import configured_chain_key
from tests.support.sregym_results import write_sregym_results
from tests.support.statements import statements

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: differ between two gradings of the same submission whatever path made them
_NOT_CONTENT = {
    "id", "grading_id", "created_at", "listed_at", "graded_at", "regrade_job_id",
    "previous_grading_id", "lease_owner", "lease_expires_at", "judge_call_id", "started_at",
    "finished_at",
}  # fmt: skip


async def _rows(engine: Engine, table: str, job_id: str) -> dict[str, list[dict[str, Any]]]:
    """Rows of ``table`` of the job's items by submission, without ids and timestamps."""
    if table == "grading":
        sql = "SELECT submission_id AS sub, * FROM grading WHERE regrade_job_id = :job"
    else:
        sql = (
            f"SELECT g.submission_id AS sub, t.* FROM {table} t "
            "JOIN grading g ON g.id = t.grading_id WHERE g.regrade_job_id = :job"
        )
    by_sub: dict[str, list[dict[str, Any]]] = {}
    with engine.connect() as connection:
        for row in (connection.execute(text(sql), {"job": job_id})).mappings():
            kept = {k: v for k, v in row.items() if k not in _NOT_CONTENT}
            if kept.get("votes") is not None:  # a grading's votes name calls by id
                votes = kept["votes"]
                votes = json.loads(votes) if isinstance(votes, str) else votes
                kept["votes"] = [{**v, "call_id": v["call_id"] is not None} for v in votes]
            by_sub.setdefault(row["sub"], []).append(kept)
    return {sub: sorted(rows, key=repr) for sub, rows in by_sub.items()}


async def _import(engine: Engine, key: ServiceKey, tmp_path: Path) -> None:
    """The 42 SREGym runs, audited under the service's key (the chain verifies whole)."""
    fixture = write_sregym_results(tmp_path)
    folder, problems = read_sregym_folder(fixture.root), read_problems(fixture.problems_file)
    store = Store(engine, key=key)
    await ImportQueries(store.db, store.catalog).sregym(folder, problems, rubric=sregym_rubric())


async def _create(client: Any, admin: dict[str, str]) -> str:
    reply = await client.post(
        "/v1/regrade-jobs", json={"judge": NEW_JUDGE, "mode": "shadow"}, headers=admin
    )
    assert reply.status_code == 201, reply.text
    return str(reply.json()["id"])


async def _slow(services: Services, job_id: str) -> None:
    """Grade the job's items one at a time, the usual way (no fast path)."""
    workers = GradingWorkers(services, count=1, worker_id="slow")
    queue = services.store.queue
    while claims := await queue.claim_pending("slow", limit=8, lease_seconds=60, regrade=True):
        assert {c.grading_id for c in claims} <= set(await _items(services.store, job_id))
        await asyncio.gather(*(workers.process(claim) for claim in claims))


async def _items(store: Store, job_id: str) -> list[str]:
    sql = "SELECT id FROM grading WHERE regrade_job_id = :job"
    with store.engine.connect() as connection:
        return list((connection.execute(text(sql), {"job": job_id})).scalars())


async def _cache_filled(
    api_client: ClientFactory, tokens: Callable[..., Any]
) -> tuple[dict[str, str], ScriptedBackend]:
    """An admin token and the new judge, after one regrade filled the judge cache."""
    admin = await tokens("admin")
    judge = ScriptedBackend(model="fail")
    async with api_client(backends={NEW_JUDGE: judge}) as client:
        await _finished(client, admin, await _create(client, admin))
    return admin, judge


async def test_fast_path_gradings_equal_the_usual_ones_field_by_field(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    service_key: ServiceKey,
    tmp_path: Path,
) -> None:
    await _import(engine, service_key, tmp_path)
    admin, judge = await _cache_filled(api_client, tokens)
    assert len(judge.requests) == 42
    async with api_client(start_workers=False, backends={NEW_JUDGE: judge}) as client:
        services: Services = client.app.state.services
        slow_job, fast_job = await _create(client, admin), await _create(client, admin)
        await client.post(f"/v1/regrade-jobs/{fast_job}/pause", headers=admin)
        await _slow(services, slow_job)
        await client.post(f"/v1/regrade-jobs/{fast_job}/resume", headers=admin)
        fast = _fast_path(services)
        with statements(engine) as seen:
            assert await fast.run("fast") == ([], False)  # 42 items, one batch, all hits
        # the batch's cache entries in one query, its verdicts in one write
        assert sum("FROM judge_cache" in s for s in seen) == 1
        assert sum(s.startswith("INSERT INTO answer") for s in seen) == 1
        assert await fast.run("fast") == ([], False)
        slow_view = await _finished(client, admin, slow_job)
        fast_view = await _finished(client, admin, fast_job)
    assert len(judge.requests) == 42  # neither path asked the judge
    for view in (slow_view, fast_view):
        assert (view["state"], view["done"], view["cache_hits"], view["judge_calls"]) == (
            "done", 42, 42, 0,
        )  # fmt: skip
    for table in ("grading", "answer", "judge_call"):
        slow_rows, fast_rows = (
            await _rows(engine, table, slow_job),
            await _rows(engine, table, fast_job),
        )
        assert len(fast_rows) == 42 and fast_rows == slow_rows, table
    await _assert_completed_once(engine, fast_job)
    assert (await verify_chain(engine, key=configured_chain_key())).ok


async def test_a_batch_that_cannot_be_stored_whole_is_stored_one_by_one(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    service_key: ServiceKey,
    tmp_path: Path,
) -> None:
    await _import(engine, service_key, tmp_path)
    admin, judge = await _cache_filled(api_client, tokens)
    async with api_client(start_workers=False, backends={NEW_JUDGE: judge}) as client:
        services: Services = client.app.state.services
        job = await _create(client, admin)
        queue = services.store.queue
        claims = await queue.claim_pending("fast", limit=50, lease_seconds=60, regrade=True)
        fast = _fast_path(services)
        lookup = _SharedLookup(services.store.cache.get_many)
        answered = await asyncio.gather(*(fast._answer(claim, lookup) for claim in claims))
        assert lookup.reads == 1 and all(answered)
        hits = [
            (claim, FinishedGrading(claim.grading_id, "fast", found[1]))
            for claim, found in zip(claims, answered, strict=True)
            if found is not None
        ]
        wrong = hits[5][1].result.model_copy(update={"rubric_version": "not-this-one"})
        hits[5] = (claims[5], FinishedGrading(claims[5].grading_id, "fast", wrong))
        misses: list[Claim] = []

        stored = await fast._store(hits, misses)

        assert misses == [claims[5]]  # left to the usual path, still leased
        assert set(stored) == {c.grading_id for c in claims} - {claims[5].grading_id}
        view = (await client.get(f"/v1/regrade-jobs/{job}", headers=admin)).json()
        assert (view["done"], view["remaining"]) == (41, 1)
    assert (await verify_chain(engine, key=configured_chain_key())).ok


def _ignore(*_: Any) -> None:
    """No metrics in these tests."""


def _fast_path(services: Services) -> FastRegrade:
    """The fast path of worker ``fast``, with no metrics."""
    workers = GradingWorkers(services, count=1, worker_id="fast")
    return FastRegrade(services, workers._review_marks, _ignore, workers._landed)


async def _assert_completed_once(engine: Engine, job_id: str) -> None:
    sql = (
        "SELECT count(*), count(DISTINCT entity_id) FROM audit_log "
        "WHERE event = 'grading.completed' AND entity_id IN "
        "(SELECT id FROM grading WHERE regrade_job_id = :job)"
    )
    with engine.connect() as connection:
        total, distinct = (connection.execute(text(sql), {"job": job_id})).one()
    assert total == distinct == 42


async def test_misses_and_paused_jobs_are_left_to_the_usual_path(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    service_key: ServiceKey,
    tmp_path: Path,
) -> None:
    await _import(engine, service_key, tmp_path)
    admin = await tokens("admin")
    judge = ScriptedBackend(model="fail")
    backends = {NEW_JUDGE: judge}
    async with api_client(start_workers=False, backends=backends, poll_seconds=0.05) as client:
        services: Services = client.app.state.services
        job = await _create(client, admin)  # nothing cached yet: every item is a miss
        await client.post(f"/v1/regrade-jobs/{job}/pause", headers=admin)
        fast = _fast_path(services)
        assert await fast.run("fast") == ([], False)  # a paused job's items are not claimed
        await client.post(f"/v1/regrade-jobs/{job}/resume", headers=admin)
        await asyncio.sleep(0.1)  # it looks again one poll (0.05 s here) after finding none
        misses, full = await fast.run("fast", free=4)  # misses: no more than the free slots
        assert len(misses) == 4 and full
        misses, full = await fast.run("fast", free=4)  # a miss keeps the batch small
        assert len(misses) == 4 and full
        misses, full = await fast.run("fast")
        assert len(misses) == 42 - 8 and not full
        view = (await client.get(f"/v1/regrade-jobs/{job}", headers=admin)).json()
        assert (view["done"], view["remaining"], view["cache_hits"]) == (0, 42, 0)
    assert judge.requests == []  # the fast path never asks the judge
    with engine.connect() as connection:
        owners = connection.execute(
            text("SELECT DISTINCT lease_owner FROM grading WHERE regrade_job_id = :job"),
            {"job": job},
        )
        assert list(owners.scalars()) == ["fast"]  # still leased, for the usual path


async def test_a_failed_give_back_of_spare_items_keeps_the_misses_for_the_slots(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    service_key: ServiceKey,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch grown on cache hits that meets misses gives its spare items back; when that
    fails (a database error), the slots still get the misses they were claimed for and the
    spares wait out their lease: no claimed item is dropped by this process."""
    await _import(engine, service_key, tmp_path)
    admin = await tokens("admin")
    backends = {NEW_JUDGE: ScriptedBackend(model="fail")}
    async with api_client(start_workers=False, backends=backends) as client:
        services: Services = client.app.state.services
        await _create(client, admin)  # nothing cached: every item is a miss
        fast = _fast_path(services)
        fast._batch = 50  # as after batches of hits

        async def broken(*_: Any) -> int:
            raise RuntimeError("database gone")

        monkeypatch.setattr(services.store.queue, "release_leases", broken)
        misses, full = await fast.run("fast", free=4)
    assert len(misses) == 4 and not full


async def test_a_batch_whose_commit_went_through_unacknowledged_is_counted_stored(
    api_client: ClientFactory,
    tokens: Callable[..., Any],
    engine: Engine,
    service_key: ServiceKey,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The commit of a batch of verdicts answered from the judge cache goes through, but
    the connection drops before the worker hears so: each item written again alone is
    refused (it is graded), and is counted among the gradings stored, once, not among
    the results discarded."""
    await _import(engine, service_key, tmp_path)
    admin, judge = await _cache_filled(api_client, tokens)
    real = QueueRepository.complete_many
    dropped: list[int] = []

    async def unacknowledged(self: QueueRepository, items: Any, **kwargs: Any) -> list[bool]:
        stored = await real(self, items, **kwargs)
        if len(items) > 1 and not dropped:  # the fast path's first batch of several
            dropped.append(len(items))
            raise DROPPED
        return stored

    monkeypatch.setattr(QueueRepository, "complete_many", unacknowledged)
    async with api_client(backends={NEW_JUDGE: judge}) as client:
        job = await _create(client, admin)
        view = await _finished(client, admin, job)
        await asyncio.sleep(0.2)
        scrape = (await client.get("/metrics", headers=admin)).text
    assert dropped, "no batch of several was stored"
    assert view["done"] == 42
    await _assert_completed_once(engine, job)
    assert _metric(scrape, "sre_judge_grading_results_discarded_total") == 0
    assert _metric(scrape, "sre_judge_gradings_total", status="graded") == 42
