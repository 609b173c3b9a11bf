"""Shadow-regrade and provisional gradings in the reports, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from api.reports.filters import ReportFilter
from api.reports.queries import ReportQueries
from storage import Store
from tests.support.gradings import add_many, shadow_regrade

NEW = ReportFilter(judge="openai:new-judge")
NEW_SHADOW = ReportFilter(judge="openai:new-judge", include="shadow")

#: the engine matters here (the report SQL): run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def test_shadow_gradings_count_only_when_included(store: Store) -> None:
    await add_many(store, {"pass": 2, "fail": 2})
    await shadow_regrade(store, passing=3)
    assert await ReportQueries(store.db).outcome_counts(NEW) == []
    [new] = await ReportQueries(store.db).outcome_counts(NEW_SHADOW)
    assert (new.passed, new.failed) == (3, 1)
    by_judge = await ReportQueries(store.db).outcome_counts(
        ReportFilter(include="shadow"), group_by=["judge"]
    )
    assert [(c.key, c.passed, c.failed) for c in by_judge] == [
        (("openai:judge-model",), 2, 2),
        (("openai:new-judge",), 3, 1),
    ]
    # the current judge's figures do not change by including shadow gradings
    [old] = await ReportQueries(store.db).outcome_counts(
        ReportFilter(judge="judge-model", include="shadow")
    )
    assert (old.passed, old.failed) == (2, 2)


async def test_a_shadow_regrade_run_twice_counts_once(store: Store) -> None:
    await add_many(store, {"pass": 3})
    await shadow_regrade(store, passing=0)
    await shadow_regrade(store, passing=3)
    [new] = await ReportQueries(store.db).outcome_counts(NEW_SHADOW)
    assert (new.passed, new.failed) == (3, 0), "only the newest shadow grading counts"
    questions = await ReportQueries(store.db).question_counts(NEW_SHADOW)
    assert {q.n for q in questions} == {3}


async def test_provisional_gradings_are_counted_excluded_or_split(store: Store) -> None:
    await add_many(store, {"pass": 2, "fail": 1})
    await add_many(store, {"pass": 1}, provisional=True)
    [every] = await ReportQueries(store.db).outcome_counts(ReportFilter())
    assert (every.passed, every.failed, every.provisional) == (3, 1, 1)
    [qualified] = await ReportQueries(store.db).outcome_counts(ReportFilter(provisional="exclude"))
    assert (qualified.passed, qualified.failed, qualified.provisional) == (2, 1, 0)
    [only] = await ReportQueries(store.db).outcome_counts(ReportFilter(provisional="only"))
    assert (only.passed, only.provisional) == (1, 1)
    split = await ReportQueries(store.db).outcome_counts(ReportFilter(), group_by=["provisional"])
    assert [(c.key, c.passed, c.failed) for c in split] == [
        (("provisional",), 1, 0),
        (("qualified",), 2, 1),
    ]
