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
