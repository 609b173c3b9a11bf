"""Counts behind the reports, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest

from api.adjudication.tag_queries import TagQueries
from api.reports.export_reads import ExportReads
from api.reports.filters import ReportFilter
from api.reports.queries import ReportQueries
from judge.rubric import load_rubric_dir
from storage import Store
from tests.conftest import Clock
from tests.storage.helpers import override, sregym_rubric
from tests.support.gradings import add_grading, add_many

EVERYTHING = ReportFilter()
#: the rubric files' current versions, as the service reads them
CURRENT = load_rubric_dir()

#: the engine matters here (the report SQL): run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def _override(store: Store, grading_id: str, **change: object) -> None:
    view = await store.gradings.get(grading_id)
    assert view is not None
    await override(
        store,
        grading_id,
        rubric=sregym_rubric(),
        expected_revision=view.grading.revision,
        reason="checked by hand",
        author_id="adj-1",
        author_name="Ada",
        **change,  # type: ignore[arg-type]
    )


async def test_outcomes_count_unscored_and_pending_apart(store: Store) -> None:
    await add_many(store, {"pass": 3, "fail": 2, "unscored": 1, "pending": 1}, agent="a")
    await add_many(store, {"pass": 1, "fail-few": 1}, agent="b")
    [overall] = await ReportQueries(store.db).outcome_counts(EVERYTHING)
    assert (overall.passed, overall.failed, overall.unscored, overall.pending) == (4, 3, 1, 1)
    by_agent = await ReportQueries(store.db).outcome_counts(EVERYTHING, group_by=["agent"])
    assert [(c.key, c.passed, c.failed, c.unscored, c.pending) for c in by_agent] == [
        (("a",), 3, 2, 1, 1),
        (("b",), 1, 1, 0, 0),
    ]


async def test_effective_and_judge_verdicts_differ_after_an_override(store: Store) -> None:
    failing = await add_grading(store, "fail", agent="a")
    await add_grading(store, "pass", agent="a")
    await _override(store, failing, kind="verdict", verdict="pass")
    [effective] = await ReportQueries(store.db).outcome_counts(EVERYTHING)
    [judge] = await ReportQueries(store.db).outcome_counts(EVERYTHING, verdicts="judge")
    assert (effective.passed, effective.failed) == (2, 0)
    assert (judge.passed, judge.failed) == (1, 1)


async def test_groups_and_filters(store: Store, clock: Clock) -> None:
    await add_grading(store, "pass", agent="a", model="m1", scenario_id="s1")
    clock.advance(60)
    await add_grading(store, "fail", agent="a", model="m2")
    rubric = sregym_rubric()
    rows = await ReportQueries(store.db).outcome_counts(
        EVERYTHING, group_by=["model", "scenario", "rubric", "judge"]
    )
    assert [c.key for c in rows] == [
        ("m1", "s1", f"sregym-rca@{rubric.version}", "openai:judge-model"),
        ("m2", None, f"sregym-rca@{rubric.version}", "openai:judge-model"),
    ]
    for kw in (
        {"rubric": "sregym-rca"},
        {"rubric": f"sregym-rca@{rubric.version}"},
        {"judge": "judge-model"},
        {"judge": "openai:judge-model"},
    ):
        [row] = await ReportQueries(store.db).outcome_counts(ReportFilter(**kw))  # type: ignore[arg-type]
        assert row.passed + row.failed == 2, kw
    assert await ReportQueries(store.db).outcome_counts(ReportFilter(rubric="other")) == []
    later = clock() - timedelta(seconds=30)
    [row] = await ReportQueries(store.db).outcome_counts(ReportFilter(created_after=later))
    assert (row.passed, row.failed) == (0, 1)
    [row] = await ReportQueries(store.db).outcome_counts(
        ReportFilter(created_before=later, scenario_id="s1")
    )
    assert (row.passed, row.failed) == (1, 0)


async def test_question_counts_use_effective_answers(store: Store) -> None:
    failing = await add_grading(store, "fail")  # D3 all no
    await add_grading(store, "pass")
    await _override(store, failing, kind="answer", question_id="D3-Q1", answer=True)
    effective = {
        c.question_id: (c.yes, c.n)
        for c in await ReportQueries(store.db).question_counts(EVERYTHING)
    }
    judge = {
        c.question_id: (c.yes, c.n)
        for c in await ReportQueries(store.db).question_counts(EVERYTHING, verdicts="judge")
    }
    assert list(effective) == [q.id for q in sregym_rubric().questions]
    assert effective["D3-Q1"] == (2, 2) and judge["D3-Q1"] == (1, 2)
    assert effective["D3-Q2"] == judge["D3-Q2"] == (1, 2)
    assert effective["D1-Q1"] == (2, 2)


async def test_dimension_failures(store: Store) -> None:
    await add_many(store, {"fail": 2, "fail-few": 1, "pass": 3, "unscored": 1})
    rows = {d.dimension_id: d for d in await ReportQueries(store.db).dimension_failures(EVERYTHING)}
    assert {d: r.failing for d, r in rows.items()} == {"D1": 3, "D2": 3, "D3": 3}
    assert rows["D3"].zero_yes == 2 and rows["D1"].zero_yes == 0
    # fail: D3 weakest; fail-few: one yes everywhere, every dimension ties for weakest
    assert (rows["D1"].weakest, rows["D2"].weakest, rows["D3"].weakest) == (1, 1, 3)


async def test_dimension_failures_of_an_overridden_grading(store: Store) -> None:
    grading = await add_grading(store, "fail")  # D1 3/3, D2 3/3, D3 0/3
    for question, answer in (("D3-Q1", True), ("D1-Q1", False), ("D1-Q2", False)):
        await _override(store, grading, kind="answer", question_id=question, answer=answer)
    # effective: D1 1/3, D2 3/3, D3 1/3 -> 5 yes, fails, no dimension at zero
    effective = {
        d.dimension_id: d for d in await ReportQueries(store.db).dimension_failures(EVERYTHING)
    }
    assert {d: (r.failing, r.zero_yes, r.weakest) for d, r in effective.items()} == {
        "D1": (1, 0, 1),
        "D2": (1, 0, 0),
        "D3": (1, 0, 1),
    }
    judge = {
        d.dimension_id: d
        for d in await ReportQueries(store.db).dimension_failures(EVERYTHING, verdicts="judge")
    }
    assert {d: (r.failing, r.zero_yes, r.weakest) for d, r in judge.items()} == {
        "D1": (1, 0, 0),
        "D2": (1, 0, 0),
        "D3": (1, 1, 1),
    }


async def test_failure_tags_in_force_are_counted(store: Store) -> None:
    await TagQueries(store.db).ensure_vocabulary({"skipped-evidence": "x", "misread-unit": "y"})
    first = await add_grading(store, "fail", agent="a")
    second = await add_grading(store, "fail", agent="a")
    await add_grading(store, "pending", agent="a")
    for grading in (first, second):
        await TagQueries(store.db).add(
            grading, tag="skipped-evidence", note="", author_id="adj", author_name="Ada"
        )
    removed = await TagQueries(store.db).add(
        first, tag="misread-unit", note="", author_id="adj", author_name="Ada"
    )
    assert removed.id is not None
    await TagQueries(store.db).remove(first, removed.id, actor="adj")
    counts = await ReportQueries(store.db).failure_tag_counts(EVERYTHING, group_by=["agent"])
    assert [(c.key, c.tag, c.tagged, c.n) for c in counts] == [(("a",), "skipped-evidence", 2, 2)]


async def test_arm_outcomes_per_scenario_and_verdicts_per_attempt(store: Store) -> None:
    passing = await add_many(store, {"pass": 2, "fail": 1}, agent="a", scenario_id="s1")
    await add_many(store, {"pass": 1}, agent="a", scenario_id="s2")
    await add_many(store, {"fail": 2, "unscored": 1}, agent="b", scenario_id="s1")
    a, b = await ReportQueries(store.db).arm_readings(
        ReportFilter(agent="a"), ReportFilter(agent="b")
    )
    assert [(c.key, c.passed, c.failed) for c in a.per_scenario] == [
        (("s1",), 2, 1),
        (("s2",), 1, 0),
    ]
    assert [(c.key, c.passed, c.failed) for c in b.per_scenario] == [(("s1",), 0, 2)]
    # the attempts counted in n, one verdict each; the unscored one is not among them
    assert len(a.verdicts) == 4 and sorted(v for [v] in a.verdicts.values()) == [0, 1, 1, 1]
    assert sorted(v for [v] in b.verdicts.values()) == [False, False]
    first = await store.gradings.get(passing[0])
    assert first is not None and a.verdicts[first.grading.submission_id] == [True]


async def test_export_streams_every_grading_in_batches(store: Store, clock: Clock) -> None:
    ids = []
    for outcome in ("pass", "fail", "unscored", "pending", "pass"):
        ids.append(await add_grading(store, outcome))  # type: ignore[arg-type]
        clock.advance(1)
    async with ExportReads(store.db, CURRENT).open(EVERYTHING, batch=2) as export:
        assert list(export.rubrics) == [("sregym-rca", sregym_rubric().version)]
        streamed = [item async for item in export.gradings]
    assert [item.view.grading.id for item in streamed] == ids
    assert [len(item.view.answers) for item in streamed] == [9, 9, 0, 0, 9]
    async with ExportReads(store.db, CURRENT).open(ReportFilter(agent="nobody")) as export:
        assert export.rubrics == {} and [item async for item in export.gradings] == []


async def test_an_export_reads_one_snapshot_while_gradings_are_added(
    store: Store, clock: Clock
) -> None:
    before = [await add_grading(store, "pass") for _ in range(3)]
    async with ExportReads(store.db, CURRENT).open(EVERYTHING, batch=1) as export:
        streamed = [await anext(export.gradings)]
        clock.advance(1)
        await add_grading(store, "fail")  # a writer meanwhile: not in this export
        streamed += [item async for item in export.gradings]
    assert sorted(item.view.grading.id for item in streamed) == sorted(before)


async def _fail_after_one(store: Store) -> None:
    async with ExportReads(store.db, CURRENT).open(EVERYTHING, batch=1) as export:
        await anext(export.gradings)
        raise RuntimeError("the consumer failed")


async def test_an_export_left_early_gives_its_connection_back(store: Store) -> None:
    for _ in range(3):
        await add_grading(store, "pass")
    pool = store.engine.pool
    async with ExportReads(store.db, CURRENT).open(EVERYTHING, batch=1) as export:
        async for _item in export.gradings:
            break
    assert pool.checkedout() == 0  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError, match="the consumer failed"):
        await _fail_after_one(store)
    assert pool.checkedout() == 0  # type: ignore[attr-defined]
    async with ExportReads(store.db, CURRENT).open(EVERYTHING, batch=1) as export:
        await anext(export.gradings)
        await export.gradings.aclose()  # type: ignore[attr-defined]
        assert pool.checkedout() == 1  # type: ignore[attr-defined]  # held until the block ends
    assert pool.checkedout() == 0  # type: ignore[attr-defined]


async def test_pass_rates_over_time_group_by_utc_day_and_by_week_of_monday(
    store: Store, clock: Clock
) -> None:
    """Both databases label a day ``YYYY-MM-DD`` (UTC) and a week by its Monday."""
    made = []
    for outcome, days_later in (("pass", 0), ("fail", 2), ("pass", 1), ("pass", 4)):
        clock.advance(days_later * 86400)
        await add_grading(store, outcome, agent="a")
        made.append((clock().date(), outcome))
    queries = ReportQueries(store.db)
    by_day = await queries.outcome_counts(EVERYTHING, group_by=["day"])
    expected_days: dict[str, list[int]] = {}
    for day, outcome in made:
        counts = expected_days.setdefault(day.isoformat(), [0, 0])
        counts[outcome == "fail"] += 1
    assert {c.key[0]: [c.passed, c.failed] for c in by_day} == expected_days
    by_week = await queries.outcome_counts(EVERYTHING, group_by=["agent", "week"])
    weeks: dict[str, int] = {}
    for day, _ in made:
        monday = (day - timedelta(days=day.weekday())).isoformat()
        weeks[monday] = weeks.get(monday, 0) + 1
    assert {c.key[1]: c.passed + c.failed for c in by_week} == weeks
    assert all(c.key[0] == "a" for c in by_week)
    assert [c.key[1] for c in by_week] == sorted(weeks)  # oldest first
