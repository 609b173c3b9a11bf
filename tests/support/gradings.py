"""Stored gradings of known outcome, built through the store, for report tests."""

from __future__ import annotations

from contextlib import suppress
from typing import Literal

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import Conflict, Store
from tests.storage.helpers import (
    graded_result,
    new_submission,
    sregym_rubric,
    submit,
    unscored_result,
)

Outcome = Literal["pass", "fail", "fail-few", "unscored", "pending"]

#: 6 yes, none in D3: fails by the rule's per-dimension veto
FAIL_D3 = ("D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3")
#: 3 yes, one per dimension: fails on the count, no dimension at zero
FAIL_FEW = ("D1-Q1", "D2-Q1", "D3-Q1")
TRUTH = "[fault_spec] component=deployment/checkout; namespace=shop || OOM"


async def _submission(store: Store, scenario_id: str | None, fields: dict[str, object]) -> str:
    """Store a submission (registering its scenario on first use); its grading's id."""
    if scenario_id is not None:
        with suppress(Conflict):
            await store.catalog.create_scenario(id=scenario_id, ground_truth=TRUTH, actor="tests")
        fields = {
            **fields,
            "scenario_id": scenario_id,
            "ground_truth": TRUTH,
            "ground_truth_source": "scenario",
        }
    return (await submit(store, new_submission(**fields))).grading.id


async def _complete(
    store: Store, grading_id: str, outcome: Outcome, *, provisional: bool = False
) -> None:
    if outcome == "unscored":
        result = unscored_result()
    else:
        yes = {"pass": None, "fail": FAIL_D3, "fail-few": FAIL_FEW}[outcome]
        result = graded_result(yes)
    assert await store.queue.complete(grading_id, "tests", result, provisional=provisional)


async def add_many(
    store: Store,
    counts: dict[Outcome, int],
    *,
    scenario_id: str | None = None,
    provisional: bool = False,
    **fields: object,
) -> list[str]:
    """Gradings of each outcome, ``counts[outcome]`` of them, with the same submission.

    ``fields`` override the submission's (agent, model, run_id, attempt, metadata ...);
    ``provisional`` marks them graded by a judge not yet qualified.
    All are submitted, claimed at once and completed: pending ones stay leased to the
    tests, which no reader minds.
    """
    planned = [
        (o, await _submission(store, scenario_id, fields))
        for o, n in counts.items()
        for _ in range(n)
    ]
    claimed = {
        c.grading_id
        for c in await store.queue.claim_pending("tests", limit=10_000, lease_seconds=600)
    }
    for outcome, grading_id in planned:
        if outcome != "pending":
            assert grading_id in claimed
            await _complete(store, grading_id, outcome, provisional=provisional)
    return [grading_id for _, grading_id in planned]


async def add_grading(
    store: Store, outcome: Outcome, *, scenario_id: str | None = None, **fields: object
) -> str:
    """One grading of ``outcome``; returns its id."""
    [grading_id] = await add_many(store, {outcome: 1}, scenario_id=scenario_id, **fields)
    return grading_id


async def shadow_regrade(store: Store, *, passing: int, judge_model: str = "new-judge") -> str:
    """A shadow regrade by ``openai:judge_model`` of every current grading, run to the end.

    The first ``passing`` items it completes pass, the others fail (no yes in D3).
    Returns the job's id.
    """
    target = RegradeTarget(
        rubric=sregym_rubric(),
        judge_spec=f"openai:{judge_model}@http://127.0.0.1:9/v1",
        judge_backend="openai",
        judge_model=judge_model,
        mode="shadow",
    )
    view = await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    done = 0
    while claims := await store.queue.claim_pending("w", limit=50, lease_seconds=60):
        for claim in claims:
            yes = None if done < passing else FAIL_D3
            assert await store.queue.complete(claim.grading_id, "w", graded_result(yes))
            done += 1
    return view.job.id
