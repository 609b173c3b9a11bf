"""Shadow-regrade and provisional gradings in the reports, on SQLite and PostgreSQL."""

from __future__ import annotations

from storage import Store
from storage.regrade.jobs import RegradeTarget
from storage.regrade.select import RegradeFilter
from storage.report_queries import ReportFilter
from tests.storage.helpers import graded_result, sregym_rubric
from tests.support.gradings import FAIL_D3, add_many

NEW = ReportFilter(judge="openai:new-judge")
NEW_SHADOW = ReportFilter(judge="openai:new-judge", include="shadow")


async def _shadow_regrade(store: Store, *, passing: int) -> None:
    """A shadow job by ``new-judge`` over every current grading: ``passing`` of them pass."""
    target = RegradeTarget(
        rubric=sregym_rubric(),
        judge_spec="openai:new-judge@http://127.0.0.1:9/v1",
        judge_backend="openai",
        judge_model="new-judge",
        mode="shadow",
    )
    await store.regrade.create_job(RegradeFilter(), target, actor="admin")
    done = 0
    while claims := await store.queue.claim_pending("w", limit=50, lease_seconds=60):
        for claim in claims:
            yes = None if done < passing else list(FAIL_D3)
            assert await store.queue.complete(claim.grading_id, "w", graded_result(yes))
            done += 1


async def test_shadow_gradings_count_only_when_included(store: Store) -> None:
    await add_many(store, {"pass": 2, "fail": 2})
    await _shadow_regrade(store, passing=3)
    assert await store.reports.outcome_counts(NEW) == []
    [new] = await store.reports.outcome_counts(NEW_SHADOW)
    assert (new.passed, new.failed) == (3, 1)
    by_judge = await store.reports.outcome_counts(
        ReportFilter(include="shadow"), group_by=["judge"]
    )
    assert [(c.key, c.passed, c.failed) for c in by_judge] == [
        (("openai:judge-model",), 2, 2),
        (("openai:new-judge",), 3, 1),
    ]
    # the current judge's figures do not change by including shadow gradings
    [old] = await store.reports.outcome_counts(ReportFilter(judge="judge-model", include="shadow"))
    assert (old.passed, old.failed) == (2, 2)


async def test_a_shadow_regrade_run_twice_counts_once(store: Store) -> None:
    await add_many(store, {"pass": 3})
    await _shadow_regrade(store, passing=0)
    await _shadow_regrade(store, passing=3)
    [new] = await store.reports.outcome_counts(NEW_SHADOW)
    assert (new.passed, new.failed) == (3, 0), "only the newest shadow grading counts"
    questions = await store.reports.question_counts(NEW_SHADOW)
    assert {q.n for q in questions} == {3}


async def test_provisional_gradings_are_counted_excluded_or_split(store: Store) -> None:
    await add_many(store, {"pass": 2, "fail": 1})
    await add_many(store, {"pass": 1}, provisional=True)
    [every] = await store.reports.outcome_counts(ReportFilter())
    assert (every.passed, every.failed, every.provisional) == (3, 1, 1)
    [qualified] = await store.reports.outcome_counts(ReportFilter(provisional="exclude"))
    assert (qualified.passed, qualified.failed, qualified.provisional) == (2, 1, 0)
    [only] = await store.reports.outcome_counts(ReportFilter(provisional="only"))
    assert (only.passed, only.provisional) == (1, 1)
    split = await store.reports.outcome_counts(ReportFilter(), group_by=["provisional"])
    assert [(c.key, c.passed, c.failed) for c in split] == [
        (("provisional",), 1, 0),
        (("qualified",), 2, 1),
    ]
