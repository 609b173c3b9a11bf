"""Keys act on the question the reader has selected: clicking a question's card (it is
focusable, outlined when focused) selects it as ``j``/``k`` do, and ``y``/``n`` on the
blind-label page and ``o`` on the grading page act on that card."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture
def bench(database_url: str, tmp_path: Path) -> Iterator[Workbench]:
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"))
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, _, tokens):
        yield Workbench(service, tokens, [_submit(service.url, tokens["agent"], DIAGNOSIS, "a")])


def test_y_on_the_label_page_answers_the_clicked_question(bench: Workbench, browser: Any) -> None:
    page = _page(browser, bench.service.url, [])
    _sign_in(page, bench.tokens["Ada"])
    page.goto(f"/gradings/{bench.gradings[0]}/label")
    page.click("#q-D2-Q1 .qtext")  # select the fourth question with the mouse
    assert page.evaluate("document.activeElement.id") == "q-D2-Q1"
    page.keyboard.press("y")
    assert page.is_checked("#q-D2-Q1 input[value=yes]"), "y did not answer the selected question"
    assert not page.is_checked("#q-D1-Q1 input[value=yes]"), "y answered D1-Q1 instead"


def test_o_on_the_grading_page_opens_the_clicked_questions_reason(
    bench: Workbench, browser: Any
) -> None:
    page = _page(browser, bench.service.url, [])
    _sign_in(page, bench.tokens["Ada"])
    page.goto(f"/gradings/{bench.gradings[0]}")
    page.keyboard.press("j")  # D1-Q1 focused by key
    page.click("#q-D3-Q1 .qtext")  # then D3-Q1 selected with the mouse
    assert page.evaluate("document.activeElement.id") == "q-D3-Q1"
    page.keyboard.press("o")
    focused = page.evaluate("document.activeElement.dataset.testid")
    assert focused == "reason-D3-Q1", f"o focused {focused}: another question's reason"
