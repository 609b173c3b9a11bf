"""Stopping the grading workers in process: claiming stops at once, and what waits for a
judge (the confirming judge too) is cut at the shutdown deadline, its lease released; so
is a claim the deadline cut while its transaction ran."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend
from judge.calls import Completion, JudgeRequest
from storage import Store, SubmissionOutcome
from tests.storage.helpers import new_submission, sregym_rubric
from tests.support.gradings import add_many
from tests.support.submissions import DIAGNOSIS, TRUTH

FIRST = "scripted:pass"
SECOND = "openai:confirmer@http://127.0.0.1:9/v1"


class _Hanging(ScriptedBackend):
    """A judge that is asked, then says nothing until ``release`` is set (or 8 s)."""

    def __init__(self, *, model: str) -> None:
        super().__init__(model=model)
        self.called, self.release = asyncio.Event(), asyncio.Event()

    async def complete(self, request: JudgeRequest) -> Completion:
        self.called.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.release.wait(), timeout=8)
        return await super().complete(request)


async def _submit(store: Store) -> SubmissionOutcome:
    return await store.submissions.create(
        new_submission(DIAGNOSIS, ground_truth=TRUTH),
        rubric=sregym_rubric(),
        judge_spec=FIRST,
        judge_backend="scripted",
        judge_model="pass",
        actor="tok-1",
    )


def _state(engine: Engine, grading_id: str) -> tuple[object, ...]:
    with engine.connect() as connection:
        query = text("SELECT status, lease_owner, claim_count FROM grading WHERE id = :id")
        return tuple(connection.execute(query, {"id": grading_id}).one())


async def test_a_grading_waiting_for_the_confirming_judge_is_cut_at_the_deadline(
    database_url: str, engine: Engine
) -> None:
    """It was marked as being stored before the confirming judge was asked, so the stop
    waited for that judge's answer (up to the judge timeout, past any SIGKILL)."""
    settings = Settings(
        database_url=database_url, judge=FIRST, confirm_judge=SECOND, pass_policy="qualified",
        shutdown_seconds=0.5, lease_seconds=300, judge_concurrency=1,
    )  # fmt: skip
    second = _Hanging(model="pass")
    backends = {FIRST: ScriptedBackend.for_mode("pass"), SECOND: second}
    runtime = Runtime(settings, engine=engine, backends=backends, workers=True)
    await runtime.start()
    try:
        outcome = await _submit(runtime.store)
        runtime.services.waiters.work.set()
        await asyncio.wait_for(second.called.wait(), timeout=10)
        started = time.monotonic()
        await runtime.workers.stop()
        took = time.monotonic() - started
    finally:
        second.release.set()
        await runtime.stop()
    assert took < 4
    assert _state(engine, outcome.grading.id)[:2] == ("pending", None)


async def test_a_stopping_runtime_claims_no_work_while_its_other_parts_stop(
    database_url: str, engine: Engine
) -> None:
    """``sre-judge worker`` stops by stopping its runtime, whose webhook delivery may wait
    for a send in flight: its workers claimed what came meanwhile."""
    settings = Settings(database_url=database_url, judge=FIRST, poll_seconds=0.05)
    runtime = Runtime(settings, engine=engine, workers=True)
    await runtime.start()
    webhooks_stop = runtime.webhooks.stop

    async def a_send_in_flight() -> None:
        await asyncio.sleep(1)
        await webhooks_stop()

    runtime.webhooks.stop = a_send_in_flight  # type: ignore[method-assign]
    stopping = asyncio.create_task(runtime.stop())
    await asyncio.sleep(0.2)
    outcome = await _submit(runtime.store)  # as another process would
    await stopping
    # not graded and no lease left: a claim already running when the stop began (a slow
    # machine's poll) may have taken it, and gave it straight back
    assert _state(engine, outcome.grading.id)[:2] == ("pending", None)


async def _regrade_items(store: Store) -> list[str]:
    """A regrade job by ``FIRST`` of one graded submission; its pending items."""
    await add_many(store, {"pass": 1}, agent="a")
    target = RegradeTarget(sregym_rubric(), FIRST, "scripted", "pass", "shadow")
    job = (await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="a")).job
    sql = text("SELECT id FROM grading WHERE regrade_job_id = :job")
    with store.engine.connect() as connection:
        return list(connection.execute(sql, {"job": job.id}).scalars())


@pytest.mark.parametrize("work", ["submission", "regrade item"])
async def test_a_claim_the_deadline_cuts_while_it_commits_is_released(
    database_url: str, engine: Engine, work: str
) -> None:
    """A claim whose transaction is under way when the stop's deadline cuts the dispatcher
    commits all the same; its gradings (live, or regrade items of the cache fast path)
    are pending with no lease afterwards, claimable at once by a restart instead of
    after the lease (300 s here)."""
    settings = Settings(
        database_url=database_url, judge=FIRST, pass_policy="unflagged", workers=1,
        poll_seconds=30, shutdown_seconds=0.2, lease_seconds=300,
    )  # fmt: skip
    backends = {FIRST: ScriptedBackend.for_mode("pass")}
    runtime = Runtime(settings, engine=engine, backends=backends, workers=True)
    leasing = threading.Event()

    def slow_lease(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if statement.startswith("UPDATE grading SET lease_owner"):
            leasing.set()
            time.sleep(0.6)  # a busy database: the stop's deadline passes meanwhile

    await runtime.start()
    try:
        await asyncio.sleep(0.3)  # the dispatcher's first (empty) round is done
        if work == "submission":
            ids = [(await _submit(runtime.store)).grading.id]
        else:
            ids = await _regrade_items(runtime.store)
        event.listen(engine, "before_cursor_execute", slow_lease)
        try:
            runtime.services.waiters.regrade_queued()  # the dispatcher claims it
            assert await asyncio.to_thread(leasing.wait, 5)
            await runtime.workers.stop()  # SIGTERM: the deadline (0.2 s) cuts the claim
        finally:
            event.remove(engine, "before_cursor_execute", slow_lease)
    finally:
        await runtime.stop()
    assert ids
    assert [_state(engine, g) for g in ids] == [("pending", None, 1)] * len(ids)
