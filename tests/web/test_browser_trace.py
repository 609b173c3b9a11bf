"""The agent's trace on a grading's page in a real browser (Debian's chromium through
Playwright, as in ``test_browser``): beside the diagnosis, hostile markup in a tool's
output shown as text and never run, the diagnosis' quote marked in the trace, each
question card saying whether its quote is in the trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.test_browser import (
    DIAGNOSIS,
    QUOTE,
    TRUTH,
    _browser_or_skip,
    _page,
    _sign_in,
    browser,
    served_workbench,
)

__all__ = ["browser"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: what a tool printed, as an agent harness recorded it: markup that must stay text
STEPS = [
    {"tool": "kubectl_get", "input": {"args": ["pods", "-n", "hotel"]}, "output": "frontend 0/1"},
    {
        "tool": "kubectl_describe",
        "input": "deployment user-service -n hotel",
        "output": "Env: the deployment sets USER_PORT=9999\n"
        '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">',
    },
]


def test_the_trace_beside_the_diagnosis_is_text_with_the_quotes_marked(
    database_url: str, browser: Any, tmp_path: Path
) -> None:
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"))
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, _, tokens):
        response = httpx.post(
            f"{service.url}/v1/submissions?wait=20",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "trace": STEPS},
            headers={"Authorization": f"Bearer {tokens['agent']}"},
            timeout=30,
        )
        assert response.status_code == 201, response.text
        outside: list[str] = []
        page = _page(browser, service.url, outside)
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        _sign_in(page, tokens["Ada"])
        page.goto(f"/gradings/{response.json()['id']}")
        page.wait_for_timeout(300)
        trace = page.locator("[data-testid=trace]")
        assert page.locator("[data-testid=trace-step]").count() == 2
        assert "<script>window.__pwned" in trace.text_content()
        assert page.evaluate("window.__pwned") is None
        assert trace.locator("img, script").count() == 0
        marked = page.locator("[data-testid=trace-steps] mark.ev-traced")
        assert marked.count() == 1 and marked.text_content() == QUOTE
        assert (marked.get_attribute("title") or "").startswith("quoted by D1-Q2")
        assert page.text_content("[data-testid=trace-check-D1-Q2]") == "found in the agent's trace"
        # beside the diagnosis: in the same column, right below it
        diagnosis_box = page.locator("[data-testid=diagnosis]").bounding_box()
        trace_box = trace.bounding_box()
        assert diagnosis_box and trace_box and abs(trace_box["x"] - diagnosis_box["x"]) < 40
        page.screenshot(path=str(tmp_path / "grading-trace.png"), full_page=True)
        assert dialogs == [] and outside == []
