"""The client against a real ``sre-judge serve`` (scripted judge): what a harness relies on."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Callable

import pytest
from sre_judge_client import (
    AsyncClient,
    Client,
    Conflict,
    Forbidden,
    GroundTruthConflict,
    InvalidRequest,
    NotFound,
    PreconditionFailed,
)

from tests.client.conftest import Served

pytestmark = pytest.mark.slow

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."


def _scenario(served: Served) -> str:
    scenario_id = f"hotel/user-port-{uuid.uuid4().hex[:8]}"
    with Client(served.url, served.admin) as admin:
        assert admin.register_scenario(scenario_id, TRUTH) is not None
        assert admin.register_scenario(scenario_id, TRUTH, exist_ok=True) is None
    return scenario_id


def test_registering_an_existing_id_with_another_ground_truth_raises_naming_both_hashes(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    scenario_id = _scenario(served)  # registered with TRUTH; again with TRUTH is no error
    other = TRUTH.replace("9999", "8888")
    with Client(served.url, served.admin) as admin:
        with pytest.raises(GroundTruthConflict) as conflict:
            admin.register_scenario(scenario_id, other, exist_ok=True)
        stored, sent = (hashlib.sha256(t.encode()).hexdigest() for t in (TRUTH, other))
        assert (conflict.value.stored_sha256, conflict.value.sent_sha256) == (stored, sent)
        assert stored in str(conflict.value) and sent in str(conflict.value)
        assert conflict.value.version == 1 and conflict.value.status == 409
        with pytest.raises(Conflict) as plain:  # without exist_ok the server's 409 says as much
            admin.register_scenario(scenario_id, other)
        assert stored in plain.value.detail and sent in plain.value.detail
        assert admin.scenarios.get(scenario_id).ground_truth == TRUTH  # nothing changed

    async def register_async() -> None:
        async with AsyncClient(served.url, served.admin) as admin:
            assert await admin.register_scenario(scenario_id, TRUTH, exist_ok=True) is None
            with pytest.raises(GroundTruthConflict):
                await admin.register_scenario(scenario_id, other, exist_ok=True)

    asyncio.run(register_async())


def test_a_harness_submits_in_three_lines_and_gets_a_typed_grading(
    serve: Callable[[str], Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    served = serve("pass")
    scenario_id = _scenario(served)
    monkeypatch.setenv("SRE_JUDGE_URL", served.url)
    monkeypatch.setenv("SRE_JUDGE_TOKEN", served.submitter)
    # the three lines of docs/harness.md
    judge = Client()
    grading = judge.submit(diagnosis=DIAGNOSIS, scenario_id=scenario_id, run_id="r1", wait=30)
    assert grading.status == "graded" and grading.passed is True
    # a submitter's view of a registered scenario's grading: by default the verdict alone
    assert grading.view == "verdict" and grading.answers == [] and grading.yes_count is None
    assert grading.submission.ground_truth is None  # hidden from the submitter
    judge.close()


def test_resubmitting_the_same_attempt_never_grades_twice(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")
    scenario_id = _scenario(served)
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    with Client(served.url, served.submitter) as judge:
        first = judge.submit(
            DIAGNOSIS, scenario_id=scenario_id, agent=agent, run_id="run-9", attempt=1, wait=30
        )
        # a harness that crashed and starts over submits the same run and attempt again
        again = judge.submit(
            DIAGNOSIS, scenario_id=scenario_id, agent=agent, run_id="run-9", attempt=1, wait=30
        )
        other = judge.submit(
            DIAGNOSIS, scenario_id=scenario_id, agent=agent, run_id="run-9", attempt=2, wait=30
        )
        assert again.id == first.id and other.id != first.id
        assert sorted(g.id for g in judge.list(agent=agent)) == sorted([first.id, other.id])


def test_waiting_for_an_id_given_twice_returns_its_grading_twice(
    serve: Callable[[str], Served],
) -> None:
    """A harness that resubmits an attempt gets the first grading back, so the ids it
    waits for may hold one twice: ``wait_many`` returns once that grading is done, one
    grading for each id given, in their order."""
    served = serve("pass")
    scenario_id = _scenario(served)
    with Client(served.url, served.submitter) as judge:
        first = judge.submit(DIAGNOSIS, scenario_id=scenario_id, run_id="twice", attempt=1)
        again = judge.submit(DIAGNOSIS, scenario_id=scenario_id, run_id="twice", attempt=1)
        assert again.id == first.id  # the first grading, given back
        done = judge.wait_many([first.id, again.id], timeout=30, poll=0.1)
    assert [g.id for g in done] == [first.id, first.id]
    assert all(g.status == "graded" for g in done)


def test_the_async_client_waits_for_an_id_given_twice_too(
    serve: Callable[[str], Served],
) -> None:
    served = serve("pass")

    async def run() -> list[str]:
        async with AsyncClient(served.url, served.submitter) as judge:
            grading = await judge.submit(DIAGNOSIS, ground_truth=TRUTH, wait=30)
            assert grading.status == "graded"
            done = await judge.wait_many([grading.id, grading.id], timeout=30, poll=0.1)
            return [g.id for g in done]

    ids = asyncio.run(run())
    assert len(ids) == 2 and ids[0] == ids[1]


def test_two_agents_or_models_under_one_run_and_attempt_are_two_submissions(
    serve: Callable[[str], Served],
) -> None:
    """Two agents (or models) graded on one scenario under one run id and attempt number
    are two attempts, each graded, not a resubmission of one (nor a key reused)."""
    served = serve("pass")
    scenario_id = _scenario(served)
    with Client(served.url, served.submitter) as judge:
        first = judge.submit(
            DIAGNOSIS, scenario_id=scenario_id, agent="stratus", model="m1",
            run_id="nightly", attempt=1, wait=30,
        )  # fmt: skip
        other = judge.submit(
            DIAGNOSIS, scenario_id=scenario_id, agent="react", model="m2",
            run_id="nightly", attempt=1, wait=30,
        )  # fmt: skip
        assert other.id != first.id
        assert other.submission.agent == "react" and other.status == "graded"


def test_errors_carry_the_field_at_fault(serve: Callable[[str], Served]) -> None:
    served = serve("pass")
    with Client(served.url, served.submitter) as judge:
        with pytest.raises(InvalidRequest) as refused:
            judge.submit(DIAGNOSIS, scenario_id="x", ground_truth=TRUTH)
        assert refused.value.status == 422 and refused.value.field == "scenario_id"
        with pytest.raises(NotFound):
            judge.get("no-such-grading")
        grading = judge.submit(DIAGNOSIS, ground_truth=TRUTH, wait=30)
        with pytest.raises(Forbidden):
            judge.override(grading.id, verdict="fail", reason="not mine to judge")


def test_adjudicators_override_and_label_from_a_script(serve: Callable[[str], Served]) -> None:
    served = serve("pass")
    with Client(served.url, served.submitter) as agent:
        grading = agent.submit(DIAGNOSIS, ground_truth=TRUTH, wait=30)
    with Client(served.url, served.adjudicator) as ada:
        with pytest.raises(PreconditionFailed):
            ada.override(grading.id, verdict="fail", reason="stale", revision=grading.revision + 5)
        overridden = ada.override(grading.id, verdict="fail", reason="misses the port's owner")
        assert overridden.passed is False and overridden.verdict_override == "fail"
        labelled = ada.label(grading.id, {q.question_id: "yes" for q in grading.answers})
        assert labelled["grading"]["id"] == grading.id


def test_the_async_client_pages_and_waits_for_many(serve: Callable[[str], Served]) -> None:
    served = serve("pass")
    agent = f"agent-{uuid.uuid4().hex[:8]}"

    async def run() -> None:
        async with AsyncClient(served.url, served.submitter) as judge:
            handles = [
                await judge.submit(f"{DIAGNOSIS} #{n}", ground_truth=TRUTH, agent=agent)
                for n in range(5)
            ]
            done = await judge.wait_many([h.id for h in handles], timeout=60, poll=0.2)
            assert [g.id for g in done] == [h.id for h in handles]
            assert all(g.status == "graded" for g in done)
            listed = [g.id async for g in judge.list(agent=agent, page_size=2)]
            assert sorted(listed) == sorted(h.id for h in handles)

    asyncio.run(run())


def test_an_admin_starts_and_follows_a_regrade(serve: Callable[[str], Served]) -> None:
    served = serve("pass")
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    with Client(served.url, served.submitter) as judge:
        judge.submit(DIAGNOSIS, ground_truth=TRUTH, agent=agent, wait=30)
    with Client(served.url, served.admin) as admin:
        job = admin.start_regrade(filter={"agent": agent}, judge="scripted:fail")
        states = list(admin.follow_regrade(job.id, poll=0.2, timeout=60))
        assert states[-1].state == "done" and states[-1].total == 1
