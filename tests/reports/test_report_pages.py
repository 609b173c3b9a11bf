"""The report pages: pass rates and question yes-rates drawn with their intervals, an arm
comparison, judge-human agreement; each chart says its filter and verdicts and links to
the gradings behind it."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

from api.reports.filters import ReportFilter
from api.reports.models import GroupRate
from api.reports.page_view import time_chart
from judge.statistics import wilson_interval
from tests.support.judge_server import sregym_reply
from tests.support.submissions import IDS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
# the judge quotes the diagnosis: a yes without its quote would be held for a human
PASS, FAIL = sregym_reply(set(IDS), evidence="USER_PORT=9999"), sregym_reply(set())


async def _submit(client: Any, headers: dict[str, str], agent: str, scenario: str) -> str:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={  # distinct texts: the judge cache would answer a repeated prompt
            "diagnosis": f"{DIAGNOSIS} (attempt {scenario} of {agent})",
            "ground_truth": TRUTH,
            "agent": agent,
            "metadata": {"scenario": scenario},
        },
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


async def _five(client: Any, agent: dict[str, str]) -> list[str]:
    """alpha passes three times, beta fails twice (the scripted judge's order)."""
    return [
        await _submit(client, agent, name, f"s{i}")
        for i, name in enumerate(["alpha", "alpha", "alpha", "beta", "beta"])
    ]


async def test_pass_rates_by_agent_are_drawn_with_intervals_and_link_their_gradings(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, PASS, PASS, FAIL, FAIL)) as c:
        await _five(c, agent)
        await sign_in(c, ada)
        page = (await c.get("/reports?group_by=agent&verdicts=judge&inline=include")).text
        assert 'data-testid="pass-rate-chart"' in page and "<svg" in page
        assert "the judge&#39;s own verdicts" in page and "all current gradings" in page
        assert '<a href="/gradings?agent=alpha">' in page
        assert "100% · 3/3" in page and "0% · 0/2" in page
        assert 'data-testid="question-chart"' in page and "D1-Q1" in page
        listed = (await c.get("/gradings?agent=alpha")).text
        assert listed.count('<a href="/gradings/') == 3
        narrowed = (await c.get("/reports?agent=beta&group_by=&inline=include")).text
        assert "agent=beta" in narrowed and "0% · 0/2" in narrowed
        bad = await c.get("/reports?group_by=colour")
        assert bad.status_code == 422 and "group_by" in bad.text


async def test_two_arms_are_compared_with_difference_interval_and_p(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, PASS, PASS, FAIL, FAIL)) as c:
        await _five(c, agent)
        await sign_in(c, ada)
        page = (
            await c.get(
                "/reports/compare?a.agent=alpha&b.agent=beta&a.inline=include&b.inline=include"
            )
        ).text
        assert 'data-testid="difference"' in page and "+100.0 points" in page
        assert "p = 0.1" in page and "newcombe" in page.lower()
        assert 'data-testid="arms-chart"' in page and 'href="/gradings?agent=beta"' in page
        half = await c.get("/reports/compare?a.agent=alpha&b.agent=")
        assert "give each arm at least one filter" in half.text


async def test_agreement_shows_kappa_per_question_after_a_blind_label(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, FAIL)) as c:
        first = await _submit(c, agent, "alpha", "s1")
        second = await _submit(c, agent, "alpha", "s2")
        csrf = await sign_in(c, ada)
        empty = (await c.get("/reports/agreement")).text
        assert "No human labels in this filter yet." in empty
        for grading, value in ((first, "yes"), (second, "no")):
            labels = {f"q-{q}": value for q in IDS}
            done = await c.post(f"/gradings/{grading}/label", data={"_csrf": csrf, **labels})
            assert done.status_code == 200
        page = (await c.get("/reports/agreement")).text
        assert 'data-testid="kappa-chart"' in page and "judge&#39;s own answers" in page
        assert "<td>question</td><td>D1-Q1</td>" in page and "1.000" in page
        # labels count on superseded and shadow gradings too: the scope line says so
        scope = page.split('data-testid="report-scope"', 1)[1].split("</p>", 1)[0]
        assert "superseded and shadow" in scope and "current gradings" not in scope


def _chart_counts(page: str, testid: str) -> dict[str, int]:
    """Each chart row's label -> the n its figures show."""
    chart = page.split(f'data-testid="{testid}"', 1)[1].split("</figure>", 1)[0]
    rows = re.findall(r'<g class="row" data-label="([^"]*)">(.*?)</g>', chart, flags=re.S)
    counts = {}
    for label, body in rows:
        figures = re.search(r'<text class="figures"[^>]*>([^<]*)</text>', body)
        assert figures is not None, body
        shown = re.search(r"\bn (?:= )?(\d+)|\d+/(\d+)", figures.group(1))
        assert shown is not None, f"{label}: no n in {figures.group(1)!r}"
        counts[label] = int(shown.group(1) or shown.group(2))
    return counts


def _table_counts(page: str, testid: str, levels: tuple[str, ...]) -> dict[str, int]:
    """Each table row's item -> its n, for the levels the chart draws."""
    table = page.split(f'data-testid="{testid}"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr><td>([^<]*)</td><td>([^<]*)</td><td class="num">(\d+)</td>', table)
    return {item: int(n) for level, item, n in rows if level in levels}


async def test_the_agreement_chart_counts_the_same_n_as_its_table(
    api_client: Any, tokens: Any
) -> None:
    # one labelled grading: every kappa is undefined at n = 1, which the chart called n = 0
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(FAIL)) as c:  # a fail: no pass held for a human
        grading = await _submit(c, agent, "alpha", "s1")
        csrf = await sign_in(c, ada)
        labels = {f"q-{q}": "yes" for q in IDS}
        done = await c.post(f"/gradings/{grading}/label", data={"_csrf": csrf, **labels})
        assert done.status_code == 200, done.text
        page = (await c.get("/reports/agreement")).text
    drawn = _chart_counts(page, "kappa-chart")
    table = _table_counts(page, "agreement-table", ("question", "verdict", "answers"))
    assert drawn and set(IDS) <= set(drawn)
    assert drawn == table
    assert {drawn[q] for q in IDS} == {1}
    assert "undefined · n 1" in page


async def test_the_agreement_page_says_why_a_kappa_is_undefined(
    api_client: Any, tokens: Any
) -> None:
    """The judge passes two diagnoses and fails two; the adjudicator passes all four. A
    rater who always says the same makes kappa undefined: the page says so and why (as
    the API and the command do), in the table and in the chart row's tooltip, never a
    bare dash; the accuracy (2 of 4) comes with its Wilson interval."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, PASS, FAIL, FAIL)) as c:
        gradings = [await _submit(c, agent, "alpha", f"s{i}") for i in range(4)]
        csrf = await sign_in(c, ada)
        for grading in gradings:
            form = {"_csrf": csrf, "verdict": "pass", **{f"q-{q}": "yes" for q in IDS}}
            done = await c.post(f"/gradings/{grading}/label", data=form)
            assert done.status_code == 200, done.text
        api = (await c.get("/v1/stats/agreement?kind=judge_human", headers=ada)).json()
        page = (await c.get("/reports/agreement")).text
    [verdict] = [r for r in api["kinds"][0]["rows"] if r["level"] == "verdict"]
    reason = verdict["agreement"]["kappa_undefined"]
    assert reason == "one category only: rater b always said yes"
    table = page.split('data-testid="agreement-table"', 1)[1].split("</table>", 1)[0]
    row = next(r for r in table.split("<tr>") if r.startswith("<td>verdict</td>"))
    assert f"undefined: {reason}" in row
    assert "0.500" in row and "[0.150, 0.850]" in row  # accuracy 2/4 with its interval
    chart = page.split('data-testid="kappa-chart"', 1)[1].split("</figure>", 1)[0]
    assert f"<title>verdict: 2/4, undefined: {reason}</title>" in chart


async def test_a_submitter_gets_403_on_every_report_page(api_client: Any, tokens: Any) -> None:
    agent = await tokens("submitter")
    async with api_client() as c:
        await sign_in(c, agent)
        for path in ("/reports", "/reports/compare", "/reports/agreement"):
            assert (await c.get(path)).status_code == 403
        signed_out = await c.post("/logout", data={"_csrf": "x"})
        assert signed_out.status_code == 403


async def test_repeated_scenarios_add_the_per_scenario_view(api_client: Any, tokens: Any) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    replies = [PASS, PASS, FAIL, PASS, FAIL, FAIL, FAIL, FAIL]
    async with api_client(**scripted_judge(*replies)) as c:
        for scenario in ("s1", "s2"):
            made = await c.post(
                "/v1/scenarios", json={"id": scenario, "ground_truth": TRUTH}, headers=admin
            )
            assert made.status_code == 201, made.text
        attempts = [(name, s) for name in ("alpha", "beta") for s in ("s1", "s1", "s2", "s2")]
        for i, (name, scenario) in enumerate(attempts):
            response = await c.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": f"{DIAGNOSIS} ({i})", "scenario_id": scenario, "agent": name},
                headers=agent,
            )
            assert response.status_code == 201, response.text
        await sign_in(c, admin)
        page = (
            await c.get(
                "/reports/compare?a.agent=alpha&b.agent=beta&a.inline=include&b.inline=include"
            )
        ).text
        assert 'data-testid="by-scenario"' in page and "each scenario counts once" in page
        view = page.split('data-testid="by-scenario"')[1]
        assert '<td>s1</td>\n      <td class="num">2/2</td>' in view
        assert '<td class="num">0/2</td></tr>' in view


async def test_the_reports_page_draws_a_pass_rate_per_week(api_client: Any, tokens: Any) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as c:
        body = {"diagnosis": "The user-service sets USER_PORT=9999.", "ground_truth": TRUTH}
        body["agent"] = "alpha"
        assert (await c.post("/v1/submissions?wait=10", json=body, headers=agent)).is_success
        await sign_in(c, ada)
        page = (await c.get("/reports?group_by=agent,week&inline=include")).text
        today = datetime.now(UTC).date()
        monday = (today - timedelta(days=today.weekday())).isoformat()
        assert f"alpha · {monday}" in page  # the week's bar, labelled by its Monday


def _week(agent: str | None, week: str, passed: int, n: int, provisional: int = 0) -> GroupRate:
    return GroupRate(
        key={"agent": agent, "week": week}, n=n, passed=passed, failed=n - passed,
        unscored=0 if n else 2, pending=0, provisional=provisional, total=n or 2,
        pass_rate=passed / n if n else None, interval=wilson_interval(passed, n),
    )  # fmt: skip


def test_the_over_time_chart_draws_one_line_per_agent_with_intervals_and_gaps() -> None:
    """Points sit at their week and rate, each with its Wilson interval; a week with no
    scored grading draws no point; a provisional week is marked; weeks are in order."""
    groups = [
        _week("alpha", "2026-11-16", 1, 4),
        _week("alpha", "2026-11-02", 3, 4, provisional=1),
        _week("alpha", "2026-11-09", 0, 0),  # only unscored gradings: no point
        _week("beta", "2026-11-09", 2, 2),
        _week(None, "2026-11-16", 0, 1),
    ]
    drawn = time_chart(groups, "agent", "week", ReportFilter())
    assert [x for x, _ in drawn["periods"]] == sorted(x for x, _ in drawn["periods"])
    assert [label for _, label in drawn["periods"]] == ["2026-11-02", "2026-11-09", "2026-11-16"]
    alpha, beta, none = drawn["lines"]  # the largest series first
    assert (alpha["label"], beta["label"], none["label"]) == ("alpha", "beta", "(none)")
    assert [p["period"] for p in alpha["points"]] == ["2026-11-02", "2026-11-16"]
    first, last = alpha["points"]
    assert first["provisional"] == 1 and last["provisional"] == 0
    assert first["y"] < last["y"]  # 3/4 sits higher than 1/4 (SVG y grows downward)
    assert first["y_high"] <= first["y"] <= first["y_low"]
    assert alpha["href"] == "/gradings?agent=alpha" and none["href"] is None
    assert drawn["hidden"] == 0


def test_the_over_time_chart_draws_the_eight_largest_series_and_says_how_many_it_left_out() -> None:
    groups = [_week(f"agent-{i:02d}", "2026-11-02", 1, 1 + i) for i in range(11)]
    drawn = time_chart(groups, "agent", "week", ReportFilter())
    assert [line["label"] for line in drawn["lines"]] == [
        f"agent-{i:02d}" for i in range(10, 2, -1)
    ]
    assert drawn["hidden"] == 3


async def test_the_reports_page_shows_the_pass_rate_over_time_per_agent_or_model(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    hostile = "<img src=x onerror=alert(1)>"
    async with api_client(**scripted_judge(PASS, FAIL, PASS)) as c:
        for i, name in enumerate(["alpha", "alpha", hostile]):
            body = {"diagnosis": f"{DIAGNOSIS} ({i})", "ground_truth": TRUTH, "agent": name}
            body["model"] = "gpt-4o"
            assert (await c.post("/v1/submissions?wait=10", json=body, headers=agent)).is_success
        await sign_in(c, ada)
        page = (await c.get("/reports?inline=include")).text
        chart = page.split('data-testid="time-chart"')[1].split("</figure>")[0]
        monday = datetime.now(UTC).date() - timedelta(days=datetime.now(UTC).weekday())
        assert "Pass rate per agent and week" in chart
        assert f"alpha · {monday.isoformat()}: 1/2, 0.500" in chart
        assert chart.count('class="series ') == 2 and "<img" not in chart
        assert "&lt;img src=x onerror=alert(1)&gt;" in chart  # a name is text, escaped
        by_model = (await c.get("/reports?inline=include&series=model&over=day")).text
        chart = by_model.split('data-testid="time-chart"')[1].split("</figure>")[0]
        assert "Pass rate per model and day" in chart and 'data-series="gpt-4o"' in chart
        assert f"gpt-4o · {datetime.now(UTC).date().isoformat()}: 2/3" in chart
        bad = await c.get("/reports?series=colour")
        assert bad.status_code == 422 and "series" in bad.text


async def _empty_and_alpha(c: Any, agent: dict[str, str]) -> str:
    """One grading of the agent named "" and two of alpha; the pass-rate table's rows
    (link, label), grouped by agent."""
    for i, name in enumerate(["", "alpha", "alpha"]):
        body = {"diagnosis": f"{DIAGNOSIS} ({i})", "ground_truth": TRUTH, "agent": name}
        sent = await c.post("/v1/submissions?wait=10", json=body, headers=agent)
        assert sent.status_code == 201, sent.text
    return (await c.get("/reports?group_by=agent&inline=include")).text


def _rate_rows(page: str) -> list[tuple[str | None, str]]:
    """(link, label) of each row of the pass-rate table, the overall row first."""
    table = page.split('data-testid="pass-rate-table"', 1)[1].split("</table>", 1)[0]
    rows: list[tuple[str | None, str]] = []
    for cell in re.findall(r"<tr><td>(.*?)</td>", table):
        link = re.match(r'<a href="([^"]*)">(.*)</a>', cell)
        rows.append((unescape(link.group(1)), link.group(2)) if link else (None, cell))
    return rows


async def test_an_agent_named_empty_has_its_own_label_not_the_overall_rows(
    api_client: Any, tokens: Any
) -> None:
    """A group whose value is blank reads ``(empty)``: only the overall row is ``all``."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, PASS, PASS)) as c:
        await sign_in(c, ada)
        page = await _empty_and_alpha(c, agent)
        labels = [label for _, label in _rate_rows(page)]
        assert labels == ["all", "(empty)", "alpha"], labels


async def test_a_group_with_a_blank_value_links_to_no_list(api_client: Any, tokens: Any) -> None:
    """The gradings list reads a blank filter as "any": a blank group gets no link, and
    every link a group gets lists exactly its gradings."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, PASS, PASS)) as c:
        await sign_in(c, ada)
        rows = dict((label, link) for link, label in _rate_rows(await _empty_and_alpha(c, agent)))
        assert rows["(empty)"] is None
        assert rows["alpha"] == "/gradings?agent=alpha"
        listed = (await c.get(rows["alpha"])).text
        assert len(re.findall(r'<td><a href="/gradings/[0-9a-f]+">', listed)) == 2
