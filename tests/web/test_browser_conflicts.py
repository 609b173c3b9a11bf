"""A stale grading page in a real browser: a colleague's failure tag lands while Ada has
the page open, her override comes back refused (409) with her input kept and the tag
named, and the hostile markup in the tag's note stays text."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.test_browser import (
    DIAGNOSIS,
    Workbench,
    _browser_or_skip,
    _page,
    _sign_in,
    _submit,
    browser,
    served_workbench,
)

__all__ = ["browser"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]

NOTE = '<img src=x onerror="window.__pwned=1"> <script>window.__pwned=1</script>'
REASON = "the rule misses it <b>here</b><script>window.__pwned=2</script>"


@pytest.fixture
def bench(database_url: str, tmp_path: Path) -> Iterator[Workbench]:
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"), ("adjudicator", "Bob"))
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, _, tokens):
        yield Workbench(service, tokens, [_submit(service.url, tokens["agent"], DIAGNOSIS, "a")])


def test_a_tag_added_meanwhile_refuses_the_stale_override_and_its_note_stays_text(
    bench: Workbench, browser: Any
) -> None:
    outside: list[str] = []
    grading, base = bench.gradings[0], bench.service.url
    ada = _page(browser, base, outside)
    _sign_in(ada, bench.tokens["Ada"])
    ada.goto(f"/gradings/{grading}")  # Ada's page, about to go stale

    tagged = httpx.post(
        f"{base}/v1/gradings/{grading}/tags",
        json={"tag": "misread-unit", "note": NOTE},
        headers={"Authorization": f"Bearer {bench.tokens['Bob']}"},
        timeout=10,
    )
    assert tagged.status_code == 201, tagged.text

    form = "[data-testid=verdict-override]"
    ada.select_option(f"{form} select[name=verdict]", "pass")
    ada.fill(f"{form} input[name=reason]", REASON)
    with ada.expect_navigation() as sent:
        ada.click(f"{form} button[type=submit]")
    assert sent.value.status == 409
    conflict = ada.text_content("[data-testid=conflict]")
    assert "Your override was not saved" in conflict
    assert f"Bob: failure tag misread-unit added ({NOTE})" in conflict
    assert "regraded" not in conflict.lower()
    assert ada.input_value(f"{form} select[name=verdict]") == "pass"
    assert ada.input_value(f"{form} input[name=reason]") == REASON
    assert ada.evaluate("typeof window.__pwned") == "undefined"
    assert ada.locator("[data-testid=conflict] img, [data-testid=conflict] script").count() == 0
    ada.screenshot(path="/tmp/conflict.png", full_page=True)
    assert outside == []
