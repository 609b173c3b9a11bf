"""``sre-judge report compare`` of two judges, one of them a shadow regrade: real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.reports.charts import comparison_chart, write_difference_chart
from api.reports.filters import ReportFilter
from api.reports.rates import comparison_report
from judge.statistics import fisher_exact_p, proportion
from storage import Store
from tests.support.gradings import add_many, shadow_regrade
from tests.support.in_process_cli import run_cli
from tests.support.keys import session_key

# the seeded gradings carry inline ground truths: each arm mixes them in
OURS = ("-a", "judge=openai:judge-model", "-a", "inline=include")
THEIRS = ("-b", "judge=openai:new-judge", "-b", "inline=include")


async def test_a_judge_against_a_shadow_judge_is_one_compare(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 6, "fail": 4})
    await shadow_regrade(store, passing=3)

    empty = run_cli(database_url, "report", "compare", *OURS, *THEIRS)
    assert empty.returncode == 2, empty.stderr
    assert "arm b (judge=openai:new-judge) has no passed or failed grading (n=0" in empty.stderr
    assert "include=shadow" in empty.stderr and "0.000" not in empty.stdout

    chart = tmp_path / "difference.svg"
    done = run_cli(
        database_url, "report", "compare", *OURS, *THEIRS, "--include", "shadow",
        "--format", "json", "--chart", str(chart),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["a"]["outcome"]["passed"], report["a"]["outcome"]["n"]) == (6, 10)
    assert (report["b"]["outcome"]["passed"], report["b"]["outcome"]["n"]) == (3, 10)
    assert report["definitions"] == "verdicts: effective verdicts (after human overrides)"
    assert "judge: judge openai:new-judge" in report["b"]["scope"]
    assert any(
        line.startswith("gradings: current gradings and shadow") for line in report["b"]["scope"]
    )
    svg = chart.read_text()
    assert "a - b" in svg and "p = " in svg and "judge=openai:new-judge" in svg

    table = run_cli(
        database_url,
        "report",
        "compare",
        *OURS,
        *THEIRS,
        "--include",
        "shadow",
        "--format",
        "table",
    )
    assert table.returncode == 0, table.stderr
    assert "a - b" in table.stdout and "note: verdicts: effective verdicts" in table.stdout


async def test_the_compare_chart_shows_the_difference_its_interval_and_p(
    engine: Engine, tmp_path: Path
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 8, "fail": 2}, agent="x")
    await add_many(store, {"pass": 2, "fail": 8}, agent="y", provisional=True)
    # the seeded ground truths are inline ones: each arm mixes them in
    a, b = ReportFilter(agent="x", inline="include"), ReportFilter(agent="y", inline="include")
    report = await comparison_report(store, a, b)
    [difference], scope = comparison_chart(report)
    assert difference.estimate == report.difference.estimate
    assert abs(difference.estimate - 0.6) < 1e-9
    interval = report.difference.interval
    assert interval is not None and (difference.low, difference.high) == (
        interval.low,
        interval.high,
    )
    assert difference.p_value == report.difference.p_value
    assert "b: PROVISIONAL: 10 of 10 gradings by a judge not yet qualified" in " ".join(scope)
    assert "a: no provisional gradings (every judge had qualified)" in scope
    chart = tmp_path / "difference.svg"
    write_difference_chart([difference], chart, title="a minus b", scope=scope)
    svg = chart.read_text()
    assert f"p = {difference.p_value:.3g}" in svg and "PROVISIONAL" in svg


async def test_two_judges_of_the_same_attempts_are_compared_paired_with_mcnemar(
    database_url: str, engine: Engine
) -> None:
    """Judge a passed all 10 attempts, judge b (a shadow regrade of the same 10) passed 1:
    9 discordant pairs, all one way. McNemar's exact p by hand: under no difference each
    discordant pair goes either way with probability 1/2, so P(9 of 9 one way) = 1/2^9,
    doubled for two sides: p = 2/512 = 0.00390625 (Fisher's, unpaired, would be 0.00012)."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 10})
    await shadow_regrade(store, passing=1)

    done = run_cli(
        database_url, "report", "compare", *OURS, *THEIRS, "--include", "shadow",
        "--format", "json",
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    difference = json.loads(done.stdout)["difference"]
    assert (difference["design"], difference["test"]) == ("paired", "mcnemar-exact")
    assert difference["pairs"] == {"both": 1, "only_a": 9, "only_b": 0, "neither": 0}
    assert difference["p_value"] == pytest.approx(2 / 2**9, rel=1e-12)
    assert difference["estimate"] == pytest.approx(0.9)
    assert difference["interval"]["method"] == "newcombe-paired"
    assert difference["interval"]["low"] < 0.9 < difference["interval"]["high"]
    assert "same 10 attempts" in difference["note"]

    table = run_cli(
        database_url, "report", "compare", *OURS, *THEIRS, "--include", "shadow",
        "--format", "table",
    )  # fmt: skip
    assert table.returncode == 0, table.stderr
    assert "mcnemar-exact" in table.stdout
    assert "McNemar's exact p-value" in table.stdout and "paired" in table.stdout


async def test_arms_of_different_or_partly_shared_attempts_are_compared_unpaired(
    engine: Engine,
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 8, "fail": 2}, agent="x")
    await add_many(store, {"pass": 2, "fail": 8}, agent="y")
    x, y = ReportFilter(agent="x", inline="include"), ReportFilter(agent="y", inline="include")

    apart = (await comparison_report(store, x, y)).difference

    assert (apart.design, apart.test, apart.pairs) == ("unpaired", "fisher-exact", None)
    assert apart.p_value == pytest.approx(fisher_exact_p(proportion(8, 10), proportion(2, 10)))
    assert apart.interval is not None and apart.interval.method == "newcombe-wilson"
    assert apart.note == "unpaired: the arms graded different attempts"

    # the new judge regrades agent x's 10 attempts only; 2 more come after the regrade
    await shadow_regrade(store, passing=5)
    await add_many(store, {"pass": 2}, agent="x")
    old = ReportFilter(agent="x", judge="openai:judge-model", inline="include")
    new = ReportFilter(agent="x", judge="openai:new-judge", include="shadow", inline="include")

    partly = (await comparison_report(store, old, new)).difference

    assert (partly.design, partly.test) == ("unpaired", "fisher-exact")
    assert partly.note is not None and "share 10 of their attempts" in partly.note
    assert "(a: 12, b: 10)" in partly.note

    # an arm holding both judges' gradings counts each regraded attempt twice
    both_judges = ReportFilter(agent="x", include="shadow", inline="include")

    doubled = (await comparison_report(store, both_judges, new)).difference

    assert (doubled.design, doubled.test) == ("unpaired", "fisher-exact")
    assert doubled.note is not None and "arm a counts some attempts more than once" in doubled.note


async def test_scenarios_that_each_differ_by_the_same_rate_give_no_confident_interval(
    engine: Engine,
) -> None:
    """Arm a passes scenario A 2 of 3 times and B 5 of 6, arm b 1 of 3 and 3 of 6: both
    scenarios differ by exactly a third, so ``by_scenario`` has no spread to estimate
    from and gives the estimate alone, not a p-value near 0 from rounding noise."""
    store = Store(engine, key=session_key())
    arms = (("m-a", {"A": (2, 1), "B": (5, 1)}), ("m-b", {"A": (1, 2), "B": (3, 3)}))
    for model, counts in arms:
        for scenario, (passes, fails) in counts.items():
            await add_many(
                store, {"pass": passes, "fail": fails}, scenario_id=scenario, model=model
            )

    report = await comparison_report(store, ReportFilter(model="m-a"), ReportFilter(model="m-b"))

    by_scenario = report.by_scenario
    assert by_scenario is not None and by_scenario.design == "paired"
    assert by_scenario.estimate == pytest.approx(1 / 3)
    assert by_scenario.p_value is None and by_scenario.interval is None


async def test_an_arms_early_date_bound_reads_as_the_api_and_created_after_read_it(
    api_client: Any, tokens: Any, database_url: str, engine: Engine
) -> None:
    """``-a created_after=0001-01-01T00:00:00+01:00`` is a bound like ``--created-after``
    and the API's ``a.created_after``: kept within the stored years, it selects every
    grading rather than overflowing once moved to UTC."""
    early = "0001-01-01T00:00:00+01:00"
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2, "fail": 1}, scenario_id="s1")
    await add_many(store, {"pass": 1, "fail": 1}, scenario_id="s2", agent="agent-b")
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        api = await client.get(
            "/v1/stats/compare",
            params={"a.created_after": early, "a.agent": "agent-a", "b.agent": "agent-b"},
            headers=admin,
        )
    assert api.status_code == 200, api.text
    rates = run_cli(
        database_url, "report", "pass-rates", "--created-after", early, "--format", "json"
    )
    assert rates.returncode == 0, rates.stderr

    compare = run_cli(
        database_url, "report", "compare", "-a", f"created_after={early}", "-a", "agent=agent-a",
        "-b", "agent=agent-b", "--format", "json",
    )  # fmt: skip

    assert compare.returncode == 0, compare.stderr
    assert json.loads(compare.stdout)["a"]["outcome"]["n"] == api.json()["a"]["outcome"]["n"] == 3
