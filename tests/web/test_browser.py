"""The workbench in a real browser: Playwright driving Debian's chromium against a real
``sre-judge serve`` process. Never a downloaded browser: without /usr/bin/chromium these
tests skip, and with CI=true they fail instead (``.ci/run`` installs it)."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import JudgeServer, running_judge_server, sregym_reply
from tests.support.service_process import ServiceProcess, serving

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
QUOTE = "sets USER_PORT=9999"
SIX_WITHOUT_D1Q1 = {"D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1"}
HOSTILE = (
    f"{DIAGNOSIS}\n<script>window.__pwned = 1; alert('xss')</script>\n"
    "<img src=x onerror=\"window.__pwned = 2; alert('img')\">\n"
    '<a href="javascript:alert(3)">more</a>\n<button onclick="alert(4)">Approve</button>'
)


@dataclass
class Workbench:
    """A running service, its tokens, a gradings' ids and its scripted judge's port."""

    service: ServiceProcess
    tokens: dict[str, str]
    gradings: list[str]
    judge_port: int = 0


def _browser_or_skip() -> None:
    if CHROMIUM.exists():
        return
    if os.environ.get("CI") == "true":
        pytest.fail("/usr/bin/chromium is missing: .ci/run installs it (apt-get install chromium)")
    pytest.skip("no /usr/bin/chromium (apt-get install -y chromium)")


def _submit(url: str, token: str, diagnosis: str, agent: str) -> str:
    response = httpx.post(
        f"{url}/v1/submissions?wait=20",
        json={"diagnosis": diagnosis, "ground_truth": TRUTH, "agent": agent},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@contextmanager
def served_workbench(
    database_url: str,
    log: Path,
    names: Sequence[tuple[str, str]],
    judge_model: str = "m",
    **settings: str,
) -> Iterator[tuple[ServiceProcess, JudgeServer, dict[str, str]]]:
    """A real ``serve`` with a scripted judge (named ``judge_model``) and a token per
    (role, name) in ``names``."""
    reply = sregym_reply(SIX_WITHOUT_D1Q1, evidence=QUOTE)
    with running_judge_server(default=reply) as judge:
        env = {
            "SRE_JUDGE_DATABASE_URL": database_url,
            "SRE_JUDGE_JUDGE": f"openai:{judge_model}@http://127.0.0.1:{judge.port}/v1",
            "SRE_JUDGE_POLL_SECONDS": "0.1",
            **settings,
        }
        tokens = {}
        for role, name in names:
            done = cli_in_process("tokens", "create", "--role", role, "--name", name, env=env)
            assert done.returncode == 0, done.stderr
            tokens[name] = done.stdout.strip()
        with serving(env, log) as service:
            yield service, judge, tokens


@pytest.fixture
def workbench(database_url: str, tmp_path: Path) -> Iterator[Workbench]:
    """A service with a scripted judge, three tokens and two gradings (one hostile)."""
    _browser_or_skip()
    names = (("submitter", "agent"), ("adjudicator", "Ada"), ("adjudicator", "Bob"))
    with served_workbench(database_url, tmp_path / "serve.log", names) as (service, _, tokens):
        ids = [
            _submit(service.url, tokens["agent"], DIAGNOSIS, "alpha"),
            _submit(service.url, tokens["agent"], HOSTILE, "mallory"),
        ]
        yield Workbench(service, tokens, ids)


@pytest.fixture
def browser() -> Iterator[Any]:
    """Debian's chromium, launched by its path."""
    _browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


def _page(browser: Any, base: str, outside: list[str]) -> Any:
    """A page in a fresh context that refuses (and records) any request to another host."""
    context = browser.new_context(base_url=base)

    def route(request_route: Any) -> None:
        if request_route.request.url.startswith(base):
            request_route.continue_()
        else:
            outside.append(request_route.request.url)
            request_route.abort()

    context.route("**/*", route)
    return context.new_page()


def _sign_in(page: Any, token: str) -> None:
    page.goto("/")
    assert "/login" in page.url
    page.fill("#token", token)
    with page.expect_navigation():
        page.click("button[type=submit]")


def test_adjudicating_by_keyboard_flips_the_verdict_and_a_stale_page_loses_nothing(
    workbench: Workbench, browser: Any, tmp_path: Path
) -> None:
    outside: list[str] = []
    base = workbench.service.url
    ada = _page(browser, base, outside)
    _sign_in(ada, workbench.tokens["Ada"])
    assert ada.url.endswith("/queue")
    assert ada.text_content("[data-testid=principal]") == "Ada"
    assert ada.text_content("[data-testid=role]") == "adjudicator"
    ada.screenshot(path=str(tmp_path / "queue.png"), full_page=True)

    first = workbench.gradings[0]
    ada.click(f"[data-grading='{first}'] a[href^='/gradings/{first}?claim=true']")
    assert "You are reviewing this grading (Ada)" in ada.text_content("[data-testid=claim]")
    assert ada.text_content("[data-testid=effective-verdict]") == "FAIL"
    ada.screenshot(path=str(tmp_path / "grading.png"), full_page=True)

    bob = _page(browser, base, outside)
    _sign_in(bob, workbench.tokens["Bob"])
    bob.goto(f"/gradings/{first}")  # Bob opens the same grading before Ada saves

    ada.keyboard.press("j")  # D1-Q1, the one "no" that decides the verdict
    ada.keyboard.press("o")
    ada.keyboard.type("names user-service as the origin")
    with ada.expect_navigation():
        ada.keyboard.press("Enter")
    assert ada.text_content("[data-testid=effective-verdict]") == "PASS"
    assert "grading.overridden" in ada.text_content("[data-testid=history]")

    bob.fill("[data-testid=reason-D2-Q1]", "Bob's reason, typed before Ada saved")
    with bob.expect_navigation():
        bob.click("[data-testid=override-D2-Q1]")
    assert "Ada" in bob.text_content("[data-testid=conflict]")
    assert bob.input_value("[data-testid=reason-D2-Q1]") == "Bob's reason, typed before Ada saved"
    bob.screenshot(path=str(tmp_path / "conflict.png"), full_page=True)
    with bob.expect_navigation():
        bob.click("[data-testid=override-D2-Q1]")  # sent again, it applies on top
    assert "overridden (judge: yes)" in bob.text_content("#q-D2-Q1")

    with ada.expect_navigation():
        ada.click("text=Sign out")
    assert "/login" in ada.url
    ada.goto("/queue")
    assert "/login" in ada.url
    assert outside == []


def test_a_hostile_diagnosis_runs_nothing_and_no_page_leaves_the_host(
    workbench: Workbench, browser: Any, tmp_path: Path
) -> None:
    outside: list[str] = []
    page = _page(browser, workbench.service.url, outside)
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _sign_in(page, workbench.tokens["Ada"])
    page.goto(f"/gradings/{workbench.gradings[1]}")
    page.wait_for_timeout(300)
    assert "<script>window.__pwned" in page.text_content("[data-testid=diagnosis]")
    assert page.evaluate("window.__pwned") is None
    assert page.locator("[data-testid=diagnosis] img, [data-testid=diagnosis] button").count() == 0
    page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)

    page.goto(f"/gradings/{workbench.gradings[0]}/label")  # blind, by keyboard only
    assert "judge:" not in page.text_content("main")
    for _ in range(9):
        page.keyboard.press("y")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "3 disagreements" in " ".join(page.text_content("[data-testid=disagreements]").split())
    page.screenshot(path=str(tmp_path / "labels.png"), full_page=True)
    page.goto("/schema")
    page.wait_for_selector(".swagger-ui .info", timeout=15000)
    assert "sre-judge" in page.text_content(".swagger-ui .info")
    assert dialogs == [] and outside == []


def test_a_submitter_sees_its_grading_read_only(workbench: Workbench, browser: Any) -> None:
    outside: list[str] = []
    page = _page(browser, workbench.service.url, outside)
    _sign_in(page, workbench.tokens["agent"])
    assert page.url.endswith("/gradings")
    assert page.text_content("[data-testid=role]") == "submitter"
    page.goto(f"/gradings/{workbench.gradings[0]}")
    assert page.locator("form.override").count() == 0
    response = page.goto("/queue")
    assert response is not None and response.status == 403
    assert outside == []
