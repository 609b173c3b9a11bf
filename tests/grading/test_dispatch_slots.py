"""The dispatcher's slots when live gradings and regrade items wait together: at most
one grading in flight per worker slot, and live submissions claimed before regrade items
(the fast path asked first had leased a regrade item, then live work on top, with one
free slot)."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.grading.regrade_fast import FastRegrade
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import Completion, JudgeRequest
from judge.verdict import GradingResult
from storage import Store
from tests.storage.helpers import graded_result, new_submission, sregym_rubric
from tests.support.keys import session_key

#: the live judge and the regrade job's judge: two models behind one endpoint (one limiter)
LIVE = "openai:live@http://127.0.0.1:9/v1"
REGRADER = "openai:regrader@http://127.0.0.1:9/v1"


class _Gated(ScriptedBackend):
    """Answers like ``scripted:pass`` once ``release`` is set; notes who asked, in order."""

    def __init__(self, model: str, order: list[str]) -> None:
        super().__init__(model=model)
        self.release = asyncio.Event()
        self._order = order

    async def complete(self, request: JudgeRequest) -> Completion:
        self._order.append(self.model)
        await asyncio.wait_for(self.release.wait(), timeout=20)
        return await super().complete(request)

    def _next(self, request: JudgeRequest) -> str:
        return scripted_reply(request)


async def _seed(store: Store, regrade_items: int) -> str:
    """``regrade_items`` graded submissions and a shadow regrade job over them (items
    pending, none cached), then one live submission pending; the live grading's id."""
    for n in range(regrade_items):
        await store.submissions.create(
            new_submission(f"the checkout deployment ran out of memory ({n})"),
            rubric=sregym_rubric(), judge_spec=LIVE, judge_backend="openai",
            judge_model="live", actor="tok-1",
        )  # fmt: skip
        [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
        assert await store.queue.complete(claim.grading_id, "seed", graded_result())
    target = RegradeTarget(
        rubric=sregym_rubric(), judge_spec=REGRADER, judge_backend="openai",
        judge_model="regrader", mode="shadow",
    )  # fmt: skip
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    live = await store.submissions.create(
        new_submission("the checkout deployment was OOM killed"),
        rubric=sregym_rubric(), judge_spec=LIVE, judge_backend="openai",
        judge_model="live", actor="tok-1",
    )  # fmt: skip
    return live.grading.id


def _leased(engine: Engine) -> list[tuple[Any, ...]]:
    sql = "SELECT id, regrade_job_id FROM grading WHERE lease_owner IS NOT NULL"
    with engine.connect() as connection:
        return [tuple(r) for r in connection.execute(text(sql))]


async def _started(
    database_url: str, engine: Engine, workers: int
) -> tuple[Runtime, list[str], list[_Gated]]:
    order: list[str] = []
    judges = [_Gated("live", order), _Gated("regrader", order)]
    settings = Settings(
        database_url=database_url, judge=LIVE, workers=workers, judge_concurrency=1,
        poll_seconds=30, lease_seconds=300, pass_policy="unflagged",
        provisional_review_rate=0.0,
    )  # fmt: skip
    backends = {LIVE: judges[0], REGRADER: judges[1]}
    runtime = Runtime(settings, engine=engine, backends=backends, workers=True)
    return runtime, order, judges


async def test_claims_never_exceed_the_workers_slots(database_url: str, engine: Engine) -> None:
    """One worker slot; a regrade item and a live grading wait: the first round leased
    both (the fast path's miss and the live grading), two in flight for one slot."""
    runtime, order, judges = await _started(database_url, engine, workers=1)
    await _seed(Store(engine, key=session_key()), regrade_items=1)
    await runtime.start()
    try:
        for _ in range(200):  # until the dispatcher's first round has started its work
            if order:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        in_flight, leased = runtime.workers.in_flight, _leased(engine)
    finally:
        for judge in judges:
            judge.release.set()
        await runtime.stop()
    assert in_flight <= 1, f"{in_flight} gradings in flight for 1 worker slot"
    assert len(leased) <= 1, f"{len(leased)} gradings leased by 1 worker slot: {leased}"


async def test_a_free_slot_goes_to_the_live_grading_before_a_regrade_item(
    database_url: str, engine: Engine
) -> None:
    """One worker slot, a regrade job of three items and one live submission: the slot
    goes to the live grading (a regrade item took it, graded on the judge's one slot)."""
    runtime, order, judges = await _started(database_url, engine, workers=1)
    live_id = await _seed(Store(engine, key=session_key()), regrade_items=3)
    await runtime.start()
    try:
        for _ in range(200):
            if order:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        leased = _leased(engine)
    finally:
        for judge in judges:
            judge.release.set()
        await runtime.stop()
    assert [job for _, job in leased if job is not None] == [], (
        f"regrade items leased while a live grading waited for the one slot: {leased}"
    )
    assert live_id in {g for g, _ in leased}


CACHED_LIVE = "scripted:pass"
CACHED_REGRADER = "scripted:fail"


async def _graded_by_pass(store: Store, count: int, tag: str) -> None:
    for n in range(count):
        await store.submissions.create(
            new_submission(f"the {tag} deployment ran out of memory ({n})"),
            rubric=sregym_rubric(), judge_spec=CACHED_LIVE, judge_backend="scripted",
            judge_model="pass", actor="tok-1",
        )  # fmt: skip
        [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60, regrade=False)
        assert await store.queue.complete(claim.grading_id, "seed", graded_result())


async def _shadow_job(store: Store) -> str:
    target = RegradeTarget(
        rubric=sregym_rubric(), judge_spec=CACHED_REGRADER, judge_backend="scripted",
        judge_model="fail", mode="shadow",
    )  # fmt: skip
    view = await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    return view.job.id


def _ignore(result: GradingResult, stored: str) -> None:
    del result, stored


async def test_misses_after_a_run_of_hits_never_exceed_the_free_slots(
    database_url: str, engine: Engine
) -> None:
    """The fast path's batch doubles while every item is a hit; the next batch, claimed
    at that size, handed every miss back leased (7 for one free slot; up to 200 queued on
    the judge ahead of live work). Misses past the free slots are given back."""
    settings = Settings(
        database_url=database_url, judge=CACHED_LIVE, pass_policy="unflagged",
        provisional_review_rate=0.0, poll_seconds=30,
    )  # fmt: skip
    backends = {
        CACHED_LIVE: ScriptedBackend(model="pass"),
        CACHED_REGRADER: ScriptedBackend(model="fail"),
    }
    async with Runtime(settings, engine=engine, backends=backends) as runtime:
        services, store = runtime.services, runtime.store
        await _graded_by_pass(store, 4, "checkout")
        # a first job graded the usual way fills the judge cache for these 4
        await _shadow_job(store)
        worker = runtime.workers.worker_id
        claims = await store.queue.claim_pending(worker, limit=10, lease_seconds=60, regrade=True)
        assert len(claims) == 4
        await asyncio.gather(*(runtime.workers.process(c) for c in claims))
        await _shadow_job(store)  # 4 items, every one answered by the cache
        await _graded_by_pass(store, 12, "payments")  # 12 more, never graded by the regrader
        await _shadow_job(store)  # 16 items: 4 hits, 12 misses

        workers = runtime.workers
        fast = FastRegrade(services, workers._review_marks, _ignore, workers._landed)
        misses, full = await fast.run("fast", free=4)
        assert (misses, full) == ([], True)  # the second job: 4 hits, the batch grows to 8
        misses, _ = await fast.run("fast", free=1)  # one free slot
    assert len(misses) == 1, f"{len(misses)} misses handed back to a worker with 1 free slot"
    held = [g for g, _ in _leased(engine)]
    assert held == [misses[0].grading_id]  # the others were given back for other workers
