"""A stale grading page in a real browser: a colleague's failure tag lands while Ada has
the page open, her override comes back refused (409) with her input kept and the tag
named, and the hostile markup in the tag's note stays text; a promoted regrade replaces
the grading while she has it open, and her override comes back saying where to send it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.test_browser import (
    DIAGNOSIS,
    HOSTILE,
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
    names += (("admin", "Root"),)
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, judge, tokens):
        ids = [
            _submit(service.url, tokens["agent"], DIAGNOSIS, "a"),
            _submit(service.url, tokens["agent"], HOSTILE, "mallory"),
        ]
        yield Workbench(service, tokens, ids, judge.port)


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


def _promote_regrade(base: str, token: str, judge_port: int) -> None:
    """Regrade every current grading with the served judge and promote the new ones."""
    auth = {"Authorization": f"Bearer {token}"}
    spec = f"openai:m2@http://127.0.0.1:{judge_port}/v1"
    job = httpx.post(f"{base}/v1/regrade-jobs", json={"judge": spec, "mode": "promote"},
                     headers=auth, timeout=10)  # fmt: skip
    assert job.status_code == 201, job.text
    for _ in range(400):
        state = httpx.get(f"{base}/v1/regrade-jobs/{job.json()['id']}", headers=auth, timeout=10)
        if state.json()["state"] == "done":
            return
        time.sleep(0.05)
    raise AssertionError(f"the regrade job is still {state.json()['state']}")


def test_an_override_sent_from_a_page_a_promote_made_stale_says_where_to_send_it(
    bench: Workbench, browser: Any
) -> None:
    outside: list[str] = []
    grading, base = bench.gradings[1], bench.service.url  # the hostile diagnosis
    ada = _page(browser, base, outside)
    _sign_in(ada, bench.tokens["Ada"])
    ada.goto(f"/gradings/{grading}")  # Ada's page, about to be superseded
    _promote_regrade(base, bench.tokens["Root"], bench.judge_port)

    form = "[data-testid=verdict-override]"
    ada.select_option(f"{form} select[name=verdict]", "pass")
    ada.fill(f"{form} input[name=reason]", REASON)
    with ada.expect_navigation() as sent:
        ada.click(f"{form} button[type=submit]")
    assert sent.value.status == 409
    error = ada.text_content("[data-testid=form-error]")
    assert "Not saved" in error and "superseded by grading" in error
    assert ada.locator("[data-testid=conflict]").count() == 0  # no "send it again"
    assert ada.locator(form).count() == 0  # the superseded page offers no override form
    ada.screenshot(path="/tmp/superseded.png", full_page=True)
    with ada.expect_navigation():
        ada.click("[data-testid=superseded-by]")
    assert ada.locator(form).count() == 1  # the grading in force takes it
    assert ada.locator("[data-testid=superseded]").count() == 0
    assert ada.evaluate("typeof window.__pwned") == "undefined"
    assert outside == []
    stored = httpx.get(
        f"{base}/v1/gradings/{grading}",
        headers={"Authorization": f"Bearer {bench.tokens['Ada']}"},
        timeout=10,
    ).json()
    assert stored["overrides"] == [] and stored["superseded_by"]


def test_a_label_form_sent_with_a_tampered_verdict_is_refused_and_keeps_the_answers(
    bench: Workbench, browser: Any
) -> None:
    """A blind-label form whose verdict was altered in the page (a value the select never
    offers) comes back refused naming the verdict, the answers given still checked, and
    nothing stored; the hostile diagnosis beside it stays text."""
    outside: list[str] = []
    grading, base = bench.gradings[1], bench.service.url  # the hostile diagnosis
    ada = _page(browser, base, outside)
    _sign_in(ada, bench.tokens["Ada"])
    ada.goto(f"/gradings/{grading}/label")
    for answer in ada.locator("[data-testid=labels] input[type=radio][value=yes]").all():
        answer.check()
    ada.evaluate("document.querySelector('#verdict').add(new Option('maybe', 'maybe', true, true))")
    with ada.expect_navigation() as sent:
        ada.click("[data-testid=save-labels]")
    assert sent.value.status == 422
    refused = ada.text_content("[data-testid=labels-refused]")
    assert "verdict" in refused
    checked = "[data-testid=labels] input[type=radio][value=yes]:checked"
    assert ada.locator(checked).count() == 9  # what was sent is kept
    assert "<script>window.__pwned" in ada.text_content("[data-testid=diagnosis]")
    assert ada.evaluate("typeof window.__pwned") == "undefined"
    ada.screenshot(path="/tmp/label-refused.png", full_page=True)
    assert outside == []
    history = httpx.get(
        f"{base}/v1/gradings/{grading}/history",
        headers={"Authorization": f"Bearer {bench.tokens['Ada']}"},
        timeout=10,
    ).json()
    assert not any(e["event"] == "review.labelled" for e in history["events"])


def test_an_unknown_queue_filter_value_is_refused_on_the_page_and_the_queue_stays_inert(
    bench: Workbench, browser: Any
) -> None:
    """``/queue?provisional=yes`` comes back a 422 page naming the filter, never the queue
    read with another filter; the queue itself, holding a hostile diagnosis, shows it as
    text."""
    outside: list[str] = []
    ada = _page(browser, bench.service.url, outside)
    _sign_in(ada, bench.tokens["Ada"])
    refused = ada.goto("/queue?provisional=yes")
    assert refused is not None and refused.status == 422
    assert "provisional must be true or false" in ada.text_content("body")
    ada.screenshot(path="/tmp/queue-refused.png", full_page=True)
    listed = ada.goto("/queue")
    assert listed is not None and listed.status == 200
    assert ada.evaluate("typeof window.__pwned") == "undefined"
    ada.screenshot(path="/tmp/queue.png", full_page=True)
