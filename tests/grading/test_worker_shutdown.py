"""Stopping the grading workers in process: claiming stops at once, and what waits for a
judge (the confirming judge too) is cut at the shutdown deadline, its lease released."""

from __future__ import annotations

import asyncio
import contextlib
import time

from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend
from judge.calls import Completion, JudgeRequest
from storage import Store, SubmissionOutcome
from tests.storage.helpers import new_submission, sregym_rubric
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
    assert _state(engine, outcome.grading.id) == ("pending", None, 0)
