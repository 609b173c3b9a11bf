"""``sre-judge report compare`` of two judges, one of them a shadow regrade: real processes."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from api.reports.charts import comparison_chart, write_difference_chart
from api.reports.rates import comparison_report
from storage import Store
from storage.report_queries import ReportFilter
from tests.support.gradings import add_many, shadow_regrade
from tests.support.in_process_cli import run_cli

# the seeded gradings carry inline ground truths: each arm mixes them in
OURS = ("-a", "judge=openai:judge-model", "-a", "inline=include")
THEIRS = ("-b", "judge=openai:new-judge", "-b", "inline=include")


async def test_a_judge_against_a_shadow_judge_is_one_compare(
    database_url: str, engine: AsyncEngine, tmp_path: Path
) -> None:
    store = Store(engine)
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
    engine: AsyncEngine, tmp_path: Path
) -> None:
    store = Store(engine)
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
