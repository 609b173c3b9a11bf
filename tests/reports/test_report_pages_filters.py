"""The report pages count what the /v1/stats routes count for the same query, every
filter included, and their forms keep the filters they show."""

from __future__ import annotations

import html
import re
from typing import Any

from judge.backends.scripted import ScriptedBackend
from tests.support.judge_server import sregym_reply
from tests.support.keyed_judges import KEYS, PANEL_MODEL_SHOWN, graded_by_keyed_panel, keyed_panel
from tests.support.regrades import shadow_regrade
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, scripted_judge
from tests.web.conftest import sign_in

OTHER = "openai:other@http://127.0.0.1:9/v1"
QUOTE = "sets USER_PORT=9999"


def _judges() -> dict[str, Any]:
    """The service's judge passes three diagnoses; OTHER fails all three."""
    settings = scripted_judge(*[sregym_reply(set(IDS), evidence=QUOTE)] * 3)
    settings["backends"][OTHER] = ScriptedBackend([sregym_reply(set())] * 3, model="other")
    return settings


async def _three(c: Any, agent: dict[str, str]) -> None:
    for n in range(3):
        body = {"diagnosis": f"{DIAGNOSIS} Attempt {n}.", "ground_truth": TRUTH, "agent": "alpha"}
        response = await c.post("/v1/submissions?wait=10", json=body, headers=agent)
        assert response.json()["status"] == "graded", response.text


async def test_compare_page_keeps_an_arms_include_shadow_like_the_api(
    api_client: Any, tokens: Any
) -> None:
    """docs/reports.md: compare SREGym's judge against a shadow regrade with
    ``b.include=shadow``; the page must count the same arms as /v1/stats/compare."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await shadow_regrade(c, admin, OTHER)
        query = (
            "a.judge=openai:scripted&a.inline=include"
            "&b.judge=openai:other&b.inline=include&b.include=shadow"
        )
        api = await c.get(f"/v1/stats/compare?{query}", headers=admin)
        assert api.status_code == 200, api.text
        assert api.json()["b"]["outcome"]["n"] == 3  # the shadow gradings count in the API
        await sign_in(c, ada)
        page = await c.get(f"/reports/compare?{query}")
        assert page.status_code == 200, (page.status_code, page.text[-600:])
        assert "+100.0 points" in page.text  # 3/3 against 0/3, as the API says


async def test_reports_page_honours_provisional_exclude_like_the_api(
    api_client: Any, tokens: Any
) -> None:
    """/reports?provisional=exclude: the API leaves the provisional gradings out (n=0
    here: the scripted judge never qualified); the page silently counts them all."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        query = "inline=include&provisional=exclude&group_by="
        api = (await c.get(f"/v1/stats/pass-rates?{query}", headers=admin)).json()
        await sign_in(c, ada)
        page = (await c.get(f"/reports?{query}")).text
        n = api["overall"]["n"]
        shown = f"{api['overall']['passed']}/{n}" if n else "n = 0"
        assert shown in page, (shown, api["overall"])


async def test_reports_page_grouped_by_source_counts_inline_gradings_in_every_chart(
    api_client: Any, tokens: Any
) -> None:
    """``/reports?group_by=source`` mixes gradings against inline ground truths in, and
    says so; every chart under that caption counts them: the pass rates, each question's
    yes-rate and the pass rate over time."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)  # three passing diagnoses against inline ground truths
        await sign_in(c, ada)
        page = (await c.get("/reports?group_by=source")).text
    assert "mixed in with registered scenarios" in page  # the page's own scope line
    assert "3/3" in page  # the pass-rate chart
    questions = page[page.index('data-testid="question-chart"') :]
    answered = re.findall(r"<title>(D\d-Q\d): (\d+)/(\d+)", questions)
    assert {(q, int(n)) for q, _, n in answered} == {(q, 3) for q in IDS}, answered
    assert "No scored gradings in this filter yet." not in page  # the pass rate over time


def _form(html: str, testid: str) -> str:
    start = html.index(f'data-testid="{testid}"')
    return html[start : html.index("</form>", start)]


async def test_reports_form_keeps_inline_include_it_is_showing(
    api_client: Any, tokens: Any
) -> None:
    """/reports?inline=include says the inline ground truths are mixed in, but its form has
    no ``inline`` field: pressing Show (e.g. to group by model) silently drops it and
    the figures change (the inline gradings are counted apart again)."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await sign_in(c, ada)
        page = (await c.get("/reports?inline=include&group_by=agent")).text
        assert "inline ground truths (self-graded) mixed in" in page
        form = _form(page, "report-filters")
        assert 'name="inline"' in form, "the form drops inline=include on submit"


async def test_compare_form_keeps_each_arms_inline_include(api_client: Any, tokens: Any) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await sign_in(c, ada)
        page = (
            await c.get(
                "/reports/compare?a.agent=alpha&a.inline=include"
                "&b.judge=openai:scripted&b.inline=include"
            )
        ).text
        assert "points" in page  # a report is shown
        form = _form(page, "arm-form")
        assert 'name="a.inline"' in form and 'name="b.inline"' in form


async def test_a_dated_report_page_counts_as_the_api_and_links_no_list(
    api_client: Any, tokens: Any
) -> None:
    """Dates (without an offset: UTC) narrow a page as they narrow the API; a bar then
    links to no gradings list, which cannot filter by date."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await sign_in(c, ada)
        future = "inline=include&group_by=agent&created_after=2999-01-01T00:00:00"
        api = (await c.get(f"/v1/stats/pass-rates?{future}", headers=admin)).json()
        assert api["overall"]["n"] == 0
        page = await c.get(f"/reports?{future}")
        assert page.status_code == 200 and "3/3" not in page.text
        past = (await c.get("/reports?inline=include&group_by=agent&created_after=2000-01-01")).text
        assert "3/3" in past and 'href="/gradings?' not in past.split("report-filters")[1]


async def test_the_compare_page_links_only_the_arms_the_gradings_list_can_show(
    api_client: Any, tokens: Any
) -> None:
    """An arm narrowed by what the gradings list does not take (here dates) gets no link
    to its gradings, never a broken one; the other arm keeps its link."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await sign_in(c, ada)
        page = await c.get(
            "/reports/compare?a.agent=alpha&a.inline=include"
            "&b.agent=alpha&b.inline=include&b.created_after=2000-01-01"
        )
        assert page.status_code == 200, page.text[-600:]
        assert '<a href="/gradings?agent=alpha">gradings of arm a</a>' in page.text
        assert "gradings of arm b" not in page.text
        assert 'href="None"' not in page.text


async def test_report_pages_keep_their_filters_when_moving_between_them(
    api_client: Any, tokens: Any
) -> None:
    """A reader narrowed to one agent who moves from the rates page to agreement or the
    evaluation table stays on that agent (the compare page's arms have their own)."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await sign_in(c, ada)
        for page in ("/reports", "/reports/agreement", "/reports/table"):
            html = (await c.get(f"{page}?agent=alpha&inline=include")).text
            nav = html[
                html.index('<nav class="subnav">') : html.index(
                    "</nav>", html.index('class="subnav"')
                )
            ]
            for other in ("/reports", "/reports/agreement", "/reports/table"):
                assert f'href="{other}?agent=alpha&amp;inline=include"' in nav, (page, nav)
            assert 'href="/reports/compare"' in nav
        bare = (await c.get("/reports")).text
        assert 'href="/reports/table"' in bare


async def test_a_refused_comparison_comes_back_on_its_form_as_typed(
    api_client: Any, tokens: Any
) -> None:
    """An arm with no passed or failed grading (a typo in an agent's name) is refused on
    the compare page itself, its form filled in as sent, so the reader corrects the arm."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**_judges()) as c:
        await _three(c, agent)
        await sign_in(c, ada)
        page = await c.get("/reports/compare?a.agent=alpha&a.inline=include&b.agent=alhpa")
    assert page.status_code == 422  # refused, as the API refuses it
    assert "has no passed or failed grading" in page.text
    assert 'data-testid="arm-form"' in page.text
    assert 'name="b.agent" placeholder="b.agent" value="alhpa"' in page.text
    assert 'name="a.agent" placeholder="a.agent" value="alpha"' in page.text


async def test_a_judge_group_names_where_its_members_run_and_links_to_their_gradings(
    api_client: Any, tokens: Any
) -> None:
    """A panel whose members take their keys in their base URLs' queries: the pass rates
    grouped by judge (API and page) and the evaluation table label it with each member's
    address, the keys masked, and the page's link to its gradings lists them (the list's
    ``judge`` filter reads a panel's members without their URLs)."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    query = {"group_by": "judge", "inline": "include"}
    async with api_client(**keyed_panel()) as c:
        grading_id = await graded_by_keyed_panel(c, agent)
        api = await c.get("/v1/stats/pass-rates", params=query, headers=ada)
        await sign_in(c, ada)
        page = await c.get("/reports", params=query)
        table = await c.get("/reports/table", params={"inline": "include"})
        links = {html.unescape(h) for h in re.findall(r'href="(/gradings\?[^"]*)"', page.text)}
        listed = [await c.get(link) for link in links if "judge=" in link]
    label = f"panel:{PANEL_MODEL_SHOWN}"
    assert api.status_code == 200, api.text
    assert [g["key"] for g in api.json()["groups"]] == [{"judge": label}]
    for shown in (api, page, table):
        assert shown.status_code == 200, shown.text
        assert not any(key in shown.text for key in KEYS), shown.text
    assert html.escape(label)[:30] in page.text  # the chart truncates a long label
    assert html.escape(label) in table.text
    assert listed, "no link from the judge's group to its gradings"
    assert all(grading_id in answer.text for answer in listed)
