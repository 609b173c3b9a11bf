"""The workbench's gradings list: its filters hold on every page and match the reports'
labels, so a chart's bar links to exactly the gradings behind it."""

from __future__ import annotations

import re
from html import unescape
from typing import Any

from judge.backends.scripted import ScriptedBackend
from tests.support.submissions import TRUTH, graded
from tests.web.conftest import sign_in

DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
LOCAL = "openai:local@http://127.0.0.1:9/v1"
CLOUD = "openai:cloud@http://127.0.0.1:10/v1"


def _ids(html: str) -> list[str]:
    return re.findall(r'<td><a href="/gradings/([0-9a-f]+)">', html)


def _older_link(html: str) -> str:
    found = re.search(r'<a href="(/gradings\?[^"]*)">Older gradings', html)
    assert found, "no link to the next page"
    return unescape(found.group(1))


async def test_the_held_filter_holds_on_the_next_page_and_in_the_form(
    api_client: Any, tokens: Any
) -> None:
    adj = await tokens("adjudicator", "Ada")
    async with api_client(pass_policy="qualified") as c:  # an uncalibrated judge: held
        held = await graded(c, adj)
        assert held["held"] is True
    async with api_client(start_workers=False) as c:  # 51 pending ones, newer
        for i in range(51):
            body = {"diagnosis": f"{DIAGNOSIS} ({i})", "ground_truth": TRUTH, "agent": "a"}
            sent = await c.post("/v1/submissions", json=body, headers=adj)
            assert sent.status_code in (201, 202), sent.text
        await sign_in(c, adj)
        first = await c.get("/gradings?held=false")
        assert len(_ids(first.text)) == 50 and held["id"] not in _ids(first.text)
        assert '<option value="false" selected>not held</option>' in first.text
        second = await c.get(_older_link(first.text))
        assert second.status_code == 200 and "held=false" in str(second.url)
        assert held["id"] not in _ids(second.text) and len(_ids(second.text)) == 1
        only = await c.get("/gradings?held=true")
        assert _ids(only.text) == [held["id"]]
        # the form's "any" choices send empty values (a 422 on status they were)
        anything = await c.get("/gradings?held=&status=")
        assert anything.status_code == 200 and len(_ids(anything.text)) == 50


async def test_the_judge_filter_takes_the_reports_labels_backend_included(
    api_client: Any, tokens: Any
) -> None:
    adj = await tokens("adjudicator", "Ada")
    spec = "openai:pass@http://127.0.0.1:9/v1"
    async with api_client(judge=spec, backends={spec: ScriptedBackend.for_mode("pass")}) as c:
        other = await graded(c, adj)
        assert other["judge"] == {"backend": "openai", "model": "pass"}
    backends = {LOCAL: ScriptedBackend.for_mode("pass"), CLOUD: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=LOCAL, panel=f"{LOCAL},{CLOUD}", backends=backends) as c:
        panel = await graded(c, adj)
        assert panel["judge"]["backend"] == "panel"
    async with api_client() as c:  # scripted:pass
        mine = await graded(c, adj)
        await sign_in(c, adj)
        assert _ids((await c.get("/gradings?judge=scripted:pass")).text) == [mine["id"]]
        assert set(_ids((await c.get("/gradings?judge=pass")).text)) == {mine["id"], other["id"]}
        report = await c.get("/reports?group_by=judge&inline=include")
        links = re.findall(r'href="(/gradings\?[^"]*judge=panel[^"]*)"', report.text)
        assert links, "no link for the panel's bar"
        assert _ids((await c.get(unescape(links[0]))).text) == [panel["id"]]


async def test_the_judge_filter_names_a_panel_as_shown_and_never_compares_its_addresses(
    api_client: Any, tokens: Any
) -> None:
    """A submitter filters its gradings by the panel it is shown,
    ``panel:openai:local+openai:cloud``; base URLs written in the filter are not
    compared, so trying a member's internal address lists the same gradings whether the
    guess is right or wrong, and never tells the submitter where a judge runs."""
    agent = await tokens("submitter")
    local, cloud = "openai:local@http://10.0.0.7:9/v1", "openai:cloud@http://10.0.0.8:10/v1"
    backends = {local: ScriptedBackend.for_mode("pass"), cloud: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=local, panel=f"{local},{cloud}", backends=backends) as c:
        panel = await graded(c, agent)
        shown = f"{panel['judge']['backend']}:{panel['judge']['model']}"
        assert shown == "panel:openai:local+openai:cloud"
        await sign_in(c, agent)

        async def listed(judge: str) -> list[str]:
            page = await c.get("/gradings", params={"judge": judge})
            assert page.status_code == 200
            return _ids(page.text)

        assert await listed(shown) == [panel["id"]]
        assert await listed("openai:local+openai:cloud") == [panel["id"]]  # the model alone
        right = await listed(f"panel:{local}+{cloud}")
        wrong = await listed(f"panel:openai:local@http://10.0.0.1:9/v1+{cloud}")
        assert right == wrong == [panel["id"]]
        assert await listed("panel:openai:local+openai:other") == []
        assert await listed("panel:openai:cloud+openai:local") == []


async def test_the_gradings_list_says_its_times_are_utc(api_client: Any, tokens: Any) -> None:
    """A grading's time reads ``2025-06-01 14:03 UTC``: a reader in another zone does not
    take the UTC hour for a local one."""
    ada = await tokens("adjudicator", "Ada")
    async with api_client() as c:
        await graded(c, ada)
        await sign_in(c, ada)
        page = (await c.get("/gradings")).text
        assert re.search(r"<td>\d{4}-\d\d-\d\d \d\d:\d\d UTC</td>", page), "no UTC time"
