"""In a real browser, a question card says why code did not take the judge's yes: the
check that vetoed or flagged it and what it looked for, and a missing quote on its own
card; never a bare green "found in the diagnosis" beside a vetoed yes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.submissions import IDS
from tests.web.test_browser import (
    _browser_or_skip,
    _page,
    _sign_in,
    _submit,
    browser,
    served_workbench,
)

__all__ = ["browser"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: gives the fault's value but never names user-service, the ground truth's component
UNNAMED = "The frontend fails: the USER_PORT variable is 9999 instead of 8086."
QUOTE = "the USER_PORT variable is 9999"


def _yes_to_all() -> str:
    """SREGym's reply format: yes to every question, no quote for D3-Q2."""
    items = [
        {"id": q, "answer": "Yes", "evidence": "" if q == "D3-Q2" else QUOTE, "confidence": "High"}
        for q in IDS
    ]
    return json.dumps(items)


def test_a_vetoed_yes_and_a_missing_quote_say_why_on_their_cards(
    database_url: str, browser: Any, tmp_path: Path
) -> None:
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"))
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, judge, tokens):
        judge.default = _yes_to_all()
        grading = _submit(service.url, tokens["agent"], UNNAMED, "alpha")
        outside: list[str] = []
        page = _page(browser, service.url, outside)
        _sign_in(page, tokens["Ada"])
        page.goto(f"/gradings/{grading}")
        page.screenshot(path=str(tmp_path / "reasons.png"), full_page=True)

        veto = page.locator("[data-testid=veto-D1-Q1]")
        assert veto.is_visible()
        said = " ".join(veto.inner_text().split())
        assert said.startswith("Vetoed by grounding.component:")
        assert "the diagnosis does not name deployment/user-service" in said
        assert "The judge's yes counts as no." in said
        card = page.locator("#q-D1-Q1")
        assert page.text_content("[data-testid=answer-D1-Q1]") == "NO"
        assert card.locator("blockquote.ev-verified").count() == 0
        footer = " ".join(card.locator("blockquote footer").inner_text().split())
        assert footer.startswith("found in the diagnosis, but grounding.component vetoed")

        missing = page.locator("[data-testid=quote-D3-Q2]")
        assert missing.is_visible()
        assert "NOT verified: the judge quoted nothing from the diagnosis" in missing.inner_text()
        flag = page.locator("[data-testid=veto-D3-Q2]")
        assert flag.is_visible() and "Flagged by evidence.empty" in flag.inner_text()

        assert page.locator("#q-D2-Q1 [data-testid^=veto-]").count() == 0
        assert page.locator("#q-D2-Q1 blockquote.ev-verified").is_visible()
        assert "grounding vetoed D1-Q1" in page.text_content("[data-testid=detail]")
        assert outside == []
