"""The /reports page says what it counts, as ``/v1/stats/pass-rates`` does, and its form
keeps what the page shows."""

from __future__ import annotations

import re
from typing import Any

from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

PASS = sregym_reply(set(IDS), evidence="USER_PORT=9999")


async def _submit(c: Any, agent: dict[str, str], name: str, i: int) -> None:
    response = await c.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": f"{DIAGNOSIS} ({name} {i})", "ground_truth": TRUTH, "agent": name},
        headers=agent,
    )
    assert response.status_code == 201, response.text


def _scope_text(page: str) -> str:
    return page.split('data-testid="report-scope"', 1)[1].split("</p>", 1)[0]


async def test_group_by_source_page_does_not_claim_inline_gradings_are_counted_apart(
    api_client: Any, tokens: Any
) -> None:
    """Asking ``group_by=source`` mixes inline gradings in: the page says so, as the
    API's scope does, and never that they are counted apart."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS)) as c:
        await _submit(c, agent, "alpha", 0)  # an inline ground truth
        api = (await c.get("/v1/stats/pass-rates?group_by=source", headers=ada)).json()
        assert api["overall"]["n"] == 1  # the API mixed the inline grading in
        assert any("mixed in" in line for line in api["scope"])
        await sign_in(c, ada)
        page = (await c.get("/reports?group_by=source")).text
        assert re.search(r"<td class=\"num\">1</td><td class=\"num\">1</td>", page)  # n = 1
        scope = _scope_text(page)
        assert "counted apart: add inline=include" not in scope, scope


async def test_reports_page_states_how_many_gradings_are_provisional(
    api_client: Any, tokens: Any
) -> None:
    """Provisional gradings are counted and marked: the page states how many, as the
    API's scope does, and its table gives each group's count."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS, PASS)) as c:
        await _submit(c, agent, "alpha", 0)
        await _submit(c, agent, "alpha", 1)
        query = "group_by=agent&inline=include"
        api = (await c.get(f"/v1/stats/pass-rates?{query}", headers=ada)).json()
        assert api["overall"]["provisional"] == 2 and api["overall"]["n"] == 2
        assert any(line.startswith("PROVISIONAL: 2 of 2") for line in api["scope"])
        await sign_in(c, ada)
        page = (await c.get(f"/reports?{query}")).text
        rates = page.split("<h2>Pass rate over time", 1)[0]  # scope, chart and table
        said = re.search(r"2 provisional|provisional[^<]{0,20}2", rates)
        assert "PROVISIONAL" in rates or said, "the page never says the judge is provisional"


async def test_report_form_keeps_a_multi_key_group_by(api_client: Any, tokens: Any) -> None:
    """``/reports?group_by=agent,week`` keeps its group-by in the form: the next Show
    does not silently regroup by agent alone."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(PASS)) as c:
        await _submit(c, agent, "alpha", 0)
        await sign_in(c, ada)
        page = (await c.get("/reports?group_by=agent,model&inline=include")).text
        assert "<h2>Pass rate by agent,model</h2>" in page
        form = page.split('data-testid="report-filters"', 1)[1].split("</form>", 1)[0]
        hidden = re.search(r'<input type="hidden" name="group_by" value="([^"]*)"', form)
        select = form.split('<select name="group_by"', 1)[1].split("</select>", 1)[0]
        options = re.findall(r'<option value="([^"]*)"\s*(selected)?', select)
        chosen = next((v for v, s in options if s), options[0][0])  # a browser's choice
        sent = hidden.group(1) if hidden else chosen
        assert sent == "agent,model", f"the form sends group_by={sent!r}"
