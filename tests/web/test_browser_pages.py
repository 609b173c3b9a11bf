"""The workbench's other pages in a real browser (Debian's chromium through Playwright,
as in ``test_browser``): adjudicating and blind-labelling by keyboard alone, with the
keystrokes counted and the scripted walk timed; reports with their charts; a regrade
job's live progress; hostile text in a chart; the wrong role refused.

The keyboard walks write their figures to ``keyboard-walks.json`` in the test's folder
and print them (``-s``); nothing asserts a time: speed figures are not test verdicts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.judge_server import JudgeServer, sregym_reply
from tests.support.service_process import ServiceProcess
from tests.support.submissions import IDS
from tests.web.test_browser import (
    DIAGNOSIS,
    QUOTE,
    _browser_or_skip,
    _page,
    _sign_in,
    _submit,
    browser,
    served_workbench,
)

__all__ = ["browser"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: an agent name is text an agent harness chose: it reaches the report charts
HOSTILE_AGENT = "<img src=x onerror=alert(1)>"
REASONS = ("names user-service as the origin", "says nothing of the namespace")


@dataclass
class Bench:
    """A running service with a slow-able judge, its tokens and gradings."""

    service: ServiceProcess
    judge: JudgeServer
    tokens: dict[str, str]
    gradings: list[str] = field(default_factory=list)


@pytest.fixture
def bench(database_url: str, tmp_path: Path) -> Iterator[Bench]:
    """Four gradings of two agents (one with a hostile name), every role's token."""
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"), ("admin", "Root"))
    log = tmp_path / "serve.log"
    settings = {
        "SRE_JUDGE_JUDGE_CONCURRENCY": "1",  # one call at a time: a regrade takes seconds
        # the scripted judges are uncalibrated: under the default policy every pass is held,
        # and these pages are about passes and flips, not holds
        "SRE_JUDGE_PASS_POLICY": "unflagged",
    }
    with served_workbench(database_url, log, names, **settings) as (service, judge, tokens):
        made = Bench(service, judge, tokens)
        for i, agent in enumerate(["alpha", "alpha", HOSTILE_AGENT, HOSTILE_AGENT]):
            text = f"{DIAGNOSIS} Attempt {i}."
            made.gradings.append(_submit(service.url, tokens["agent"], text, agent))
        yield made


def _press(page: Any, keys: list[str], *, navigates: bool = False) -> int:
    """Press ``keys`` one by one (a key of one character types it); returns the count."""
    for i, key in enumerate(keys):
        if navigates and i == len(keys) - 1:
            with page.expect_navigation():
                page.keyboard.press(key)
        else:
            page.keyboard.press(key)
    return len(keys)


def _override_by_keyboard(page: Any, reason: str, *, move: int) -> int:
    """``j`` ``move`` times, ``o``, the reason typed, ``enter``: the page comes back."""
    return _press(page, ["j"] * move + ["o", *reason, "Enter"], navigates=True)


def test_adjudicating_and_blind_labelling_by_keyboard_only(
    bench: Bench, browser: Any, tmp_path: Path
) -> None:
    outside: list[str] = []
    page = _page(browser, bench.service.url, outside)
    _sign_in(page, bench.tokens["Ada"])
    assert page.url.endswith("/queue")
    page.screenshot(path=str(tmp_path / "queue.png"), full_page=True)

    started = time.perf_counter()
    keys = _press(page, ["n"], navigates=True)  # open the most urgent item
    opened = page.url.split("/gradings/")[1].split("?")[0]
    keys += _override_by_keyboard(page, REASONS[0], move=1)  # D1-Q1 no -> yes
    keys += _override_by_keyboard(page, REASONS[1], move=1)  # D1-Q2 yes -> no
    assert "overridden (judge: no)" in page.text_content("#q-D1-Q1")
    assert "overridden (judge: yes)" in page.text_content("#q-D1-Q2")
    page.evaluate("window.scrollTo(0, 0)")  # the texts column is sticky: show it on top
    page.screenshot(path=str(tmp_path / "grading.png"), full_page=True)
    keys += _press(page, ["n"], navigates=True)  # next
    adjudicated = time.perf_counter() - started
    assert opened not in page.url and "/gradings/" in page.url

    started = time.perf_counter()
    labels = _press(page, ["b"], navigates=True)  # blind labelling of this item
    assert "judge:" not in page.text_content("main")
    labels += _press(page, ["y", "n", "y", "y", "n", "y", "y", "y", "n", "Enter"], navigates=True)
    labelled = time.perf_counter() - started
    assert "disagreement" in page.text_content("[data-testid=disagreements]")
    page.screenshot(path=str(tmp_path / "labels-result.png"), full_page=True)

    typed = sum(len(r) for r in REASONS)
    figures = {
        "adjudicate": {"keys": keys, "typed_chars": typed, "command_keys": keys - typed,
                       "scripted_seconds": round(adjudicated, 2)},
        "blind_label": {"keys": labels, "scripted_seconds": round(labelled, 2)},
    }  # fmt: skip
    (tmp_path / "keyboard-walks.json").write_text(json.dumps(figures, indent=1))
    print("keyboard walks:", json.dumps(figures))
    assert figures["adjudicate"]["command_keys"] == 8 and labels == 11
    assert outside == []


def _walk_reports(page: Any, tmp_path: Path) -> None:
    """Reports, compare, agreement and judges pages: charts drawn, hostile names inert."""
    page.goto("/reports?group_by=agent&verdicts=effective&inline=include")  # self-graded
    chart = page.locator("[data-testid=pass-rate-chart] svg")
    assert chart.is_visible() and chart.locator("rect.bar").count() >= 1
    assert HOSTILE_AGENT in page.text_content("[data-testid=pass-rate-chart]")
    assert page.locator("[data-testid=pass-rate-chart] img").count() == 0
    assert "effective verdicts" in page.text_content("[data-testid=pass-rate-chart] figcaption")
    page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
    with page.expect_navigation():
        page.click("[data-testid=pass-rate-chart] a >> text=alpha")
    assert page.url.endswith("/gradings?agent=alpha")
    assert page.locator("table.list tbody tr").count() == 2

    page.goto(
        "/reports/compare?a.inline=include&b.inline=include&a.agent=alpha&b.model=&b.agent="
        + HOSTILE_AGENT
    )
    assert "points" in page.text_content("[data-testid=difference]")
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    page.goto("/reports/agreement")
    assert page.locator("[data-testid=kappa-chart] svg").is_visible()
    page.goto("/judges")
    assert "provisional" in page.text_content("main")
    page.screenshot(path=str(tmp_path / "judges.png"), full_page=True)


def _walk_regrade(page: Any, bench: Bench, tmp_path: Path) -> str:
    """A shadow regrade paused, resumed and finished, its flips followed and tagged."""
    bench.judge.delay = 1.0  # one call at a time, a second each: the job takes seconds
    bench.judge.default = sregym_reply(set(IDS), evidence=QUOTE)  # every item flips
    job = httpx.post(
        f"{bench.service.url}/v1/regrade-jobs",
        json={"judge": f"openai:m2@http://127.0.0.1:{bench.judge.port}/v1", "mode": "shadow"},
        headers={"Authorization": f"Bearer {bench.tokens['Root']}"},
        timeout=30,
    )
    assert job.status_code == 201, job.text
    job_id = str(job.json()["id"])
    page.goto(f"/regrades/{job_id}")
    assert page.text_content("[data-field=total]") == "4"
    with page.expect_navigation():
        page.click("[data-testid=job-pause]")
    assert page.text_content("[data-field=state]") == "paused"
    page.screenshot(path=str(tmp_path / "regrade-paused.png"), full_page=True)
    with page.expect_navigation():
        page.click("[data-testid=job-resume]")
    page.wait_for_selector("[data-field=done]:not(:text-is('0'))", timeout=30000)
    page.screenshot(path=str(tmp_path / "regrade-running.png"), full_page=True)
    page.wait_for_selector(".state-done[data-field=state]", timeout=30000)  # polled, reloaded
    assert page.text_content("[data-field=done]") == "4"
    assert "fail → pass: 4" in page.text_content("[data-testid=flip-report]")
    flipped = page.locator("[data-testid=fail-to-pass] a").first
    with page.expect_navigation():
        flipped.click()
    assert "current" in page.text_content("[data-testid=related]")  # the graded original
    page.select_option("[data-testid=tag-select]", "stopped-at-first-answer")
    page.fill("[data-testid=tag-note]", "never checked the <b>frontend</b> logs")
    with page.expect_navigation():
        page.click("[data-testid=tag-form] button")
    assert "never checked the <b>frontend</b> logs" in page.text_content("[data-testid=tags]")
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(tmp_path / "grading-shadow.png"), full_page=True)
    with page.expect_navigation():  # the shadow beside the grading it regraded
        page.locator("[data-testid=versus-link]").first.click()
    assert "questions answered differently" in page.text_content("[data-testid=differing]")
    assert page.locator("[data-testid=questions] tr[data-differs=yes]").count() >= 1
    page.screenshot(path=str(tmp_path / "versus.png"), full_page=True)
    page.goto(f"/regrades/{job_id}")
    page.screenshot(path=str(tmp_path / "regrade.png"), full_page=True)

    return job_id


def _wrong_roles_are_refused(browser: Any, bench: Bench, outside: list[str], job_id: str) -> None:
    submitter = _page(browser, bench.service.url, outside)
    _sign_in(submitter, bench.tokens["agent"])
    for path in ("/reports", "/reports/compare", "/reports/agreement", "/regrades", "/judges"):
        response = submitter.goto(path)
        assert response is not None and response.status == 403, path
    adjudicator = _page(browser, bench.service.url, outside)
    _sign_in(adjudicator, bench.tokens["Ada"])
    adjudicator.goto(f"/regrades/{job_id}")
    assert adjudicator.locator("[data-testid=job-pause]").count() == 0


def test_reports_regrades_and_judges_pages_and_their_roles(
    bench: Bench, browser: Any, tmp_path: Path
) -> None:
    outside: list[str] = []
    dialogs: list[str] = []
    page = _page(browser, bench.service.url, outside)
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _sign_in(page, bench.tokens["Root"])
    _walk_reports(page, tmp_path)
    job_id = _walk_regrade(page, bench, tmp_path)
    _wrong_roles_are_refused(browser, bench, outside, job_id)
    assert dialogs == [] and outside == []


#: what a Batch API (or anything at its address) may answer, quoted in the job's error
HOSTILE_ERROR = '<img src=x onerror=alert(1)><a href="javascript:alert(2)">retry now</a>'


def test_a_failing_batch_engine_shows_its_error_inert_with_its_next_try(
    bench: Bench, browser: Any, database_url: str, tmp_path: Path
) -> None:
    from sqlalchemy import update

    from storage import make_engine
    from storage.regrade.batch_tables import RegradeEngineRecord

    admin = {"Authorization": f"Bearer {bench.tokens['Root']}"}
    # the judge's server has no Batch API: every submission of the batch fails
    judge = f"openai:m@http://127.0.0.1:{bench.judge.port}/v1"
    body = {"judge": judge, "engine": "batch"}
    created = httpx.post(f"{bench.service.url}/v1/regrade-jobs", json=body, headers=admin)
    assert created.status_code == 201, created.text
    job_url = f"{bench.service.url}/v1/regrade-jobs/{created.json()['id']}"
    for _ in range(200):
        batch = httpx.get(job_url, headers=admin).json()["batch"]
        if batch["failures"]:
            break
        time.sleep(0.05)
    assert batch["failures"] == 1 and batch["retry_at"] and batch["error"], batch
    engine = make_engine(database_url)
    with engine.begin() as connection:  # as a hostile Batch API's message would be quoted
        connection.execute(
            update(RegradeEngineRecord)
            .where(RegradeEngineRecord.job_id == created.json()["id"])
            .values(error=f"APIStatusError: {HOSTILE_ERROR}")
        )
    engine.dispose()
    outside: list[str] = []
    dialogs: list[str] = []
    page = _page(browser, bench.service.url, outside)
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _sign_in(page, bench.tokens["Root"])
    page.goto(f"/regrades/{created.json()['id']}")
    shown = page.locator("[data-testid=batch-error]")
    assert shown.inner_text() == f"APIStatusError: {HOSTILE_ERROR}"  # the text, as text
    assert shown.locator("img, a").count() == 0
    engine_line = page.locator("[data-testid=batch-engine]").inner_text()
    next_try = batch["retry_at"][:19].replace("T", " ")  # shown to the second, in UTC
    assert f"(failed 1 time in a row; next try {next_try} UTC)" in engine_line, engine_line
    page.screenshot(path=str(tmp_path / "regrade-batch-failing.png"), full_page=True)
    assert dialogs == [] and outside == []
