"""A worker with a free slot takes a new grading in the submission's own transaction:
no claim round (no probe, no pick, no lease update) between intake and grading."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.engine import Engine

from api.grading.intake import accept_submission
from api.grading.workers import GradingWorkers
from api.service.principal import Principal
from api.service.schemas import SubmissionCreate
from api.service.services import Services
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import Completion, JudgeRequest
from judge.errors import JudgeUnavailable
from tests.support.statements import statements
from tests.support.submissions import DIAGNOSIS, TRUTH, first_set, graded


def _claims(seen: list[str]) -> list[str]:
    """The claim statements among ``seen``: the lease update of ``claim_pending``."""
    return [s for s in seen if s.startswith("UPDATE grading SET lease_owner")]


async def test_a_free_worker_grades_a_submission_without_claiming_it(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent = await tokens("submitter")
    async with api_client(poll_seconds=30) as client:  # no claim round from polling
        await graded(client, agent)  # the workers' first round has run
        with statements(engine) as seen:
            grading = await graded(client, agent, DIAGNOSIS + " Seen in the logs.")
        assert grading["status"] == "graded"
        assert _claims(seen) == [], "the grading was claimed from the queue"


async def test_a_replayed_submission_gives_its_slot_back(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """With one worker, a replay's reserved slot is freed, or nothing is graded again."""
    headers = {**(await tokens("submitter")), "Idempotency-Key": "run-1"}
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client(workers=1) as client:
        first = await client.post("/v1/submissions?wait=10", json=body, headers=headers)
        assert first.json()["status"] == "graded"
        for _ in range(3):
            replay = await client.post("/v1/submissions", json=body, headers=headers)
            assert replay.headers.get("idempotent-replayed") == "true"
        other = {**headers, "Idempotency-Key": "run-2"}
        second = await client.post("/v1/submissions?wait=10", json=body, headers=other)
        assert second.json()["status"] == "graded"


def _grading_row(engine: Engine) -> tuple[Any, ...]:
    with engine.connect() as connection:
        sql = "SELECT status, lease_owner FROM grading"
        return tuple(connection.execute(text(sql)).one())


async def test_a_grading_stored_for_a_cancelled_request_is_not_left_leased(
    api_client: Any, engine: Engine
) -> None:
    """A request cancelled while its submission's transaction runs (uvicorn cancels open
    requests when its graceful-shutdown timeout runs out) still stores the submission,
    its grading leased to a free worker in that transaction: the grading is released
    and graded at once, not held until the lease expires (300 s)."""
    inserting = threading.Event()

    def slow_grading_insert(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        if statement.startswith("INSERT INTO grading ("):
            inserting.set()
            time.sleep(0.3)  # the request is cancelled meanwhile; the transaction goes on

    async with api_client(poll_seconds=0.1) as client:
        await asyncio.sleep(0.3)  # the dispatcher's first round: slots free for handoff
        services: Services = client.app.state.services
        principal = Principal(id="agent", name="agent", role="submitter")
        data = SubmissionCreate(diagnosis=DIAGNOSIS, ground_truth=TRUTH)
        event.listen(engine, "before_cursor_execute", slow_grading_insert)
        try:
            request = asyncio.create_task(accept_submission(services, data, principal=principal))
            assert await asyncio.to_thread(inserting.wait, 5)
            request.cancel()
            with pytest.raises(asyncio.CancelledError):
                await request
        finally:
            event.remove(engine, "before_cursor_execute", slow_grading_insert)
        status, owner = "pending", None
        for _ in range(30):  # the workers poll every 0.1 s: 3 s is plenty
            status, owner = _grading_row(engine)
            if status != "pending":
                break
            await asyncio.sleep(0.1)
    assert status != "pending" or owner is None, f"the grading stays leased to {owner}"


FLAKY = "openai:flaky@http://127.0.0.1:9/v1"


def _claims_of(engine: Engine, grading_id: str) -> tuple[Any, ...]:
    with engine.connect() as connection:
        sql = "SELECT status, claim_count FROM grading WHERE id = :id"
        return tuple(connection.execute(text(sql), {"id": grading_id}).one())


async def test_a_due_deferred_grading_is_not_jumped_by_a_new_submission(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A worker takes a new grading at once only when no older work waits: a grading the
    same process deferred (judge away), its retry time come, was jumped by a new
    submission and waited for the next poll (30 s here). The dispatcher wakes when a
    deferral is due, and intake hands nothing over from then until it has looked."""
    headers = await tokens("submitter")
    judge = ScriptedBackend(
        [JudgeUnavailable("connection refused"), *[scripted_reply] * 10], model="flaky"
    )
    settings = {
        "workers": 1, "poll_seconds": 30, "judge_max_attempts": 1, "judge_retry_seconds": 0.2,
    }  # fmt: skip
    async with api_client(judge=FLAKY, backends={FLAKY: judge}, **settings) as client:
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
        first = await client.post("/v1/submissions", json=body, headers=headers)
        assert first.status_code == 202, first.text
        older = await first_set(client, first.headers["location"], headers, "pending_reason")
        assert older["pending_reason"].startswith("judge_unavailable")
        await asyncio.sleep(0.5)  # its retry time has come: older work is claimable again
        newer = await client.post(
            "/v1/submissions?wait=5",
            json={**body, "diagnosis": DIAGNOSIS + " Seen in the logs."},
            headers=headers,
        )
        assert newer.json()["status"] == "graded"
        status, claims = _claims_of(engine, older["id"])
    assert claims >= 2, (
        f"the older, due grading is still {status} and unclaimed since its deferral "
        "while the newer submission was handed to the one free worker slot"
    )


GATED = "openai:gated@http://127.0.0.1:9/v1"


class _Gated(ScriptedBackend):
    """Passes every diagnosis once ``release`` is set."""

    def __init__(self) -> None:
        super().__init__(model="gated")
        self.release = asyncio.Event()

    async def complete(self, request: JudgeRequest) -> Completion:
        await asyncio.wait_for(self.release.wait(), timeout=20)
        return await super().complete(request)

    def _next(self, request: JudgeRequest) -> str:
        return scripted_reply(request)


def _leased_pending(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        sql = "SELECT id FROM grading WHERE lease_owner IS NOT NULL AND status = 'pending'"
        return [r[0] for r in connection.execute(text(sql))]


async def test_a_submission_during_a_claim_never_takes_a_slot_the_claim_fills(
    api_client: Any, engine: Engine
) -> None:
    """The slots the dispatcher's claim is filling are not free to intake while the
    claim runs: one worker slot holds one grading, not the claimed one and the new
    submission's on top (the claim leased for the slots it counted before it awaited)."""
    judge = _Gated()
    settings = {"workers": 1, "poll_seconds": 30, "judge": GATED, "backends": {GATED: judge}}
    principal = Principal(id="agent", name="agent", role="submitter")
    async with api_client(**settings) as client:
        services: Services = client.app.state.services
        workers = services.handoff
        assert isinstance(workers, GradingWorkers)
        await asyncio.sleep(0.3)  # the dispatcher's first round found nothing: no backlog
        # a grading queued as another process (or an import) queues it: not handed over
        services.handoff = None
        await accept_submission(
            services, SubmissionCreate(diagnosis=DIAGNOSIS + " (a)", ground_truth=TRUTH),
            principal=principal,
        )  # fmt: skip
        services.handoff = workers
        # the dispatcher is woken and its claim is under way (held here until intake ran)
        queue = services.store.queue
        original = queue.claim_pending
        entered, proceed = asyncio.Event(), asyncio.Event()

        async def claim_pending(*args: Any, **kwargs: Any) -> Any:
            if kwargs.get("regrade") is False and not proceed.is_set():
                entered.set()
                await proceed.wait()
            return await original(*args, **kwargs)

        queue.claim_pending = claim_pending  # type: ignore[method-assign]
        services.waiters.work.set()
        await asyncio.wait_for(entered.wait(), 5)
        # meanwhile a submission arrives at this process
        await accept_submission(
            services, SubmissionCreate(diagnosis=DIAGNOSIS + " (b)", ground_truth=TRUTH),
            principal=principal,
        )  # fmt: skip
        proceed.set()
        await asyncio.sleep(0.5)
        in_flight, leased = workers.in_flight, _leased_pending(engine)
        judge.release.set()
    assert in_flight <= 1, f"{in_flight} gradings in flight for 1 worker slot"
    assert len(leased) <= 1, f"{len(leased)} gradings leased by 1 worker slot: {leased}"
