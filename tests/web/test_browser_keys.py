"""Keys act on the question the reader has selected: clicking a question's card (it is
focusable, outlined when focused) selects it as ``j``/``k`` do, and ``y``/``n`` on the
blind-label page and ``o`` on the grading page act on that card. On the blind-label page
``enter`` saves the form (a link or button keeps its own ``enter``), ``?`` shows the
keys, and the form sends one answer or the verdict alone."""

from __future__ import annotations

import contextlib
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


def _label_page(bench: Workbench, browser: Any) -> Any:
    page = _page(browser, bench.service.url, [])
    _sign_in(page, bench.tokens["Ada"])
    page.goto(f"/gradings/{bench.gradings[0]}/label")
    page.wait_for_selector("form.labels")
    return page


def test_enter_on_a_link_of_the_label_page_follows_the_link(bench: Workbench, browser: Any) -> None:
    """Enter on a focused link of the label page (the header's "Review queue") follows the
    link; it saves the labels only from the form or the page itself."""
    page = _label_page(bench, browser)
    page.focus("header nav a[href='/queue']")
    page.keyboard.press("Enter")
    with contextlib.suppress(Exception):  # the assertion below says where it is
        page.wait_for_url("**/queue", timeout=3000)
    path = page.evaluate("location.pathname")
    assert path == "/queue", f"Enter on the 'Review queue' link left the page at {path}"


def test_question_mark_on_the_label_page_shows_the_help(bench: Workbench, browser: Any) -> None:
    """``?`` on the label page shows the panel of its keys, as the page says."""
    page = _label_page(bench, browser)
    assert "help" in page.inner_text("main")  # the page promises the key
    assert not page.is_visible("#help")
    page.keyboard.press("?")
    assert page.is_visible("#help"), "? on the label page showed no help"
    assert "save the labels" in page.inner_text("#help")


def test_the_label_form_saves_a_verdict_alone(bench: Workbench, browser: Any) -> None:
    """The label form sends a verdict with no answer (as it does one answer alone): the
    browser asks for no question to be answered, and the labels are saved."""
    page = _label_page(bench, browser)
    page.select_option("select#verdict", "fail")
    page.click("[data-testid=save-labels]")
    with contextlib.suppress(Exception):  # the assertion below says where it is
        page.wait_for_url("**/label/saved", timeout=3000)
    path = page.evaluate("location.pathname")
    assert path.endswith("/label/saved"), f"the verdict alone was not sent (still at {path})"
