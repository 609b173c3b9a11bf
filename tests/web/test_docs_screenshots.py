"""The screenshots of the docs, made from the current pages with realistic data.

A real ``serve`` and two scripted judges grade a small SREGym-like evaluation: three
agents on four fault-injection problems, two attempts each, spread over three weeks; an
adjudicator overrides, skips and assigns; a shadow regrade re-judges everything with a
second judge. The test walks the queue, a grading with its trace, two judges on one
attempt, the reports, the evaluation table and the regrade, checks what each page says,
and writes a full-page screenshot of each to its folder. With ``SRE_JUDGE_SCREENSHOTS``
set to a folder (``docs`` refreshes the committed ones) it writes them there as well::

    SRE_JUDGE_SCREENSHOTS=docs .venv/bin/pytest tests/web/test_docs_screenshots.py
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.judge_server import sregym_reply
from tests.support.service_process import ServiceProcess
from tests.support.submissions import IDS
from tests.web.test_browser import _browser_or_skip, _page, _sign_in, browser, served_workbench

__all__ = ["browser"]

pytestmark = [pytest.mark.slow, pytest.mark.browser]

#: where the screenshots also go when set (``docs`` to refresh the committed ones)
SCREENSHOTS_ENV = "SRE_JUDGE_SCREENSHOTS"
FIRST_JUDGE, SECOND_JUDGE = "qwen2.5-7b-instruct", "llama-3.1-8b-instruct"
AGENTS = (
    ("stratus", "gpt-4o-2024-08-06"),
    ("react-baseline", "qwen2.5-72b-instruct"),
    ("claude-sre", "claude-sonnet-4"),
)


@dataclass(frozen=True)
class Problem:
    """A fault-injection problem: its ground truth and three diagnoses of it."""

    problem_id: str
    truth: str
    #: names the component and the mechanism, quoting what the agent saw
    right: str
    #: the right component, a wrong mechanism
    partial: str
    #: blames a bystander
    wrong: str
    #: what the right diagnosis quotes (found in its trace)
    quote: str


PROBLEMS = (
    Problem(
        "k8s_target_port-misconfig-detection-1",
        "[fault_spec] component=service/user-service; namespace=social-network || "
        "The user-service Service targets port 9999 while its pods listen on 9090.",
        "The user-service Service in social-network sends traffic to targetPort 9999, but "
        "its pods listen on 9090: every call from compose-post-service to user-service is "
        "refused (connection refused on 10.96.41.7:9999), and posts fail with 500s.",
        "user-service in social-network is unhealthy: its pods restart under memory "
        "pressure, so compose-post-service times out when it registers users.",
        "The home-timeline-service is overloaded; its Redis cache misses make the frontend slow.",
        "targetPort 9999",
    ),
    Problem(
        "auth_miss_mongodb-mitigation-1",
        "[fault_spec] component=deployment/url-shorten-mongodb; namespace=social-network || "
        "MongoDB authentication was enabled without credentials for its clients.",
        "url-shorten-mongodb in social-network now requires authentication and "
        "url-shorten-service connects without credentials: its log says 'command insert "
        "requires authentication', so composing a post with a link fails.",
        "url-shorten-mongodb in social-network is out of disk space, so inserts from "
        "url-shorten-service fail.",
        "The nginx-thrift gateway drops requests because of a bad Lua script.",
        "requires authentication",
    ),
    Problem(
        "revoke_auth_mongodb-detection-2",
        "[fault_spec] component=deployment/mongodb-rate; namespace=hotel-reservation || "
        "The admin user's readWrite role on the rate database was revoked.",
        "mongodb-rate in hotel-reservation refuses the rate service's queries: 'not "
        "authorized on rate-db to execute command find'; the admin user lost its readWrite "
        "role, so rate lookups and then searches fail.",
        "mongodb-rate in hotel-reservation has a corrupted index on the rate collection, "
        "so lookups are slow.",
        "The geo service returns wrong coordinates, which breaks the search results.",
        "not authorized on rate-db",
    ),
    Problem(
        "misconfig_app_hotel_res-localization-1",
        "[fault_spec] component=deployment/geo; namespace=hotel-reservation || "
        "The geo deployment runs a wrong image tag that crashes at start.",
        "The geo deployment in hotel-reservation runs an image tag that crashes at start "
        "(CrashLoopBackOff, 'exec format error'); the search service cannot reach geo, "
        "so nearby-hotel searches fail.",
        "geo in hotel-reservation is slow because its MongoDB has no index on location.",
        "The frontend's ingress has an expired TLS certificate.",
        "CrashLoopBackOff",
    ),
)
#: the yes answers a careful judge gives each kind of diagnosis
YES = {
    "right": set(IDS),
    "partial": {"D1-Q1", "D1-Q2", "D1-Q3", "D3-Q1", "D3-Q2"},
    "wrong": {"D3-Q1"},
}
#: (agent, problem, attempt) -> which diagnosis the agent wrote
WRITTEN = {
    (agent, p, attempt): ("right", "partial", "wrong")[(a + p + attempt * 2) % 3]
    for a, (agent, _) in enumerate(AGENTS)
    for p in range(len(PROBLEMS))
    for attempt in (1, 2)
}


def _texts() -> dict[str, tuple[str, Problem]]:
    """Each diagnosis text -> (its kind, its problem)."""
    return {
        getattr(problem, kind): (kind, problem)
        for problem in PROBLEMS
        for kind in ("right", "partial", "wrong")
    }


def _judge(body: dict[str, Any]) -> str:
    """Two scripted judges that disagree where judges do: the second is stricter on the
    failure scope of right diagnoses in hotel-reservation (a failed dimension: the pass
    becomes a fail) and more lenient on the mechanism of partial ones in social-network
    (seven yes, no failed dimension: the fail becomes a pass)."""
    prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
    second = body.get("model") == SECOND_JUDGE
    for text, (kind, problem) in _texts().items():
        if text in prompt:
            yes = set(YES[kind])
            if second and kind == "right" and "hotel-reservation" in problem.truth:
                yes -= {"D2-Q3", "D3-Q2", "D3-Q3"}
            if second and kind == "partial" and "social-network" in problem.truth:
                yes |= {"D2-Q1", "D2-Q2"}
            quote = problem.quote if kind == "right" else text.split(",")[0][:60]
            return sregym_reply(yes, evidence=quote)
    return sregym_reply(set())


def _trace(problem: Problem, text: str) -> list[dict[str, Any]]:
    """The agent's tool calls: what a right diagnosis quotes is in an observation."""
    component = problem.truth.partition("component=")[2].partition(";")[0]
    namespace = problem.truth.partition("namespace=")[2].partition(" ")[0]
    kind, name = component.split("/")
    return [
        {"tool": "kubectl", "input": f"get pods -n {namespace}", "output": f"{name}-7c9d 1/1"},
        {"tool": "kubectl", "input": f"describe {kind} {name} -n {namespace}",
         "output": f"... {problem.quote} ..."},
        {"tool": "submit", "input": text, "output": "accepted"},
    ]  # fmt: skip


@dataclass
class Evaluation:
    """The running service, its tokens, and the gradings by (agent, problem, attempt)."""

    service: ServiceProcess
    tokens: dict[str, str]
    gradings: dict[tuple[str, int, int], str]
    judge_url: str
    database: Path


def _call(service: ServiceProcess, token: str, method: str, path: str, **kw: Any) -> Any:
    headers = {"Authorization": f"Bearer {token}", **kw.pop("headers", {})}
    response = httpx.request(method, f"{service.url}{path}", headers=headers, timeout=60, **kw)
    assert response.is_success, f"{method} {path}: {response.status_code} {response.text}"
    return response


def _spread_over_three_weeks(database: Path, gradings: dict[tuple[str, int, int], str]) -> None:
    """Date each attempt in one of the last three weeks, as a month of runs would be.

    The only step behind the service's back: a service records the time it graded, and
    the over-time chart needs more than one week to draw a line."""
    now = datetime.now(UTC)
    with sqlite3.connect(database) as connection:
        for i, ((_, p, attempt), grading_id) in enumerate(sorted(gradings.items())):
            weeks_ago = (p + attempt + i) % 3
            when = (now - timedelta(weeks=weeks_ago, hours=i)).strftime("%Y-%m-%d %H:%M:%S.%f")
            sub = "(SELECT submission_id FROM grading WHERE id = ?)"
            connection.execute(f"UPDATE submission SET created_at = ? WHERE id = {sub}",
                               (when, grading_id))  # fmt: skip
            connection.execute(
                "UPDATE grading SET created_at = ?, graded_at = ? WHERE id = ?",
                (when, when, grading_id),
            )


@pytest.fixture
def evaluation(tmp_path: Path) -> Iterator[Evaluation]:
    """24 gradings of three agents, some overridden, assigned and skipped."""
    _browser_or_skip()
    database = tmp_path / "evaluation.db"
    names = (
        ("submitter", "eval-harness"),
        ("adjudicator", "Ada Lovelace"),
        ("adjudicator", "Grace Hopper"),
        ("admin", "Platform admin"),
    )
    settings = {"SRE_JUDGE_PASS_POLICY": "unflagged", "SRE_JUDGE_PROVISIONAL_REVIEW_RATE": "0.3"}
    url = f"sqlite:///{database}"
    log = tmp_path / "serve.log"
    with served_workbench(url, log, names, FIRST_JUDGE, **settings) as (service, judge, tk):
        judge.default = _judge
        judge_url = f"http://127.0.0.1:{judge.port}/v1"
        for problem in PROBLEMS:  # registered once: submissions name the scenario
            body = {"id": problem.problem_id, "ground_truth": problem.truth}
            _call(service, tk["Platform admin"], "POST", "/v1/scenarios", json=body)
        gradings = {}
        for (agent, p, attempt), kind in WRITTEN.items():
            problem = PROBLEMS[p]
            text = getattr(problem, kind)
            body = {
                "diagnosis": text,
                "scenario_id": problem.problem_id,
                "agent": agent,
                "model": dict(AGENTS)[agent],
                "attempt": attempt,
                "run_id": "sregym-2026-11",
                "trace": _trace(problem, text),
            }
            made = _call(service, tk["eval-harness"], "POST", "/v1/submissions?wait=30", json=body)
            assert made.status_code == 201, made.text  # graded within the wait
            gradings[(agent, p, attempt)] = str(made.json()["id"])
        yield Evaluation(service, tk, gradings, judge_url, database)


def _adjudicate(ev: Evaluation) -> None:
    """Ada overrides two answers and skips one item; two items are assigned to Grace."""
    ada, admin = ev.tokens["Ada Lovelace"], ev.tokens["Platform admin"]
    partial = [g for key, g in ev.gradings.items() if WRITTEN[key] == "partial"]
    wrong = [g for key, g in ev.gradings.items() if WRITTEN[key] == "wrong"]
    for grading_id, question, answer, reason in (
        (partial[0], "D2-Q1", "yes", "names the memory pressure the pods really showed"),
        (wrong[0], "D3-Q1", "no", "the overloaded service is a bystander, not the scope"),
    ):
        etag = _call(ev.service, ada, "GET", f"/v1/gradings/{grading_id}").headers["ETag"]
        body = {"question_id": question, "answer": answer, "reason": reason}
        _call(ev.service, ada, "POST", f"/v1/gradings/{grading_id}/overrides", json=body,
              headers={"If-Match": etag})  # fmt: skip
    queue = _call(ev.service, ada, "GET", "/v1/review-queue").json()
    ids = [item["grading"]["id"] for item in queue["items"]]
    assert len(ids) >= 3, queue
    _call(ev.service, ada, "POST", f"/v1/review-queue/{ids[0]}/skip",
          json={"note": "needs the pod logs; asking the harness team"})  # fmt: skip
    for grading_id in ids[1:3]:
        _call(ev.service, admin, "POST", f"/v1/review-queue/{grading_id}/assign",
              json={"assignee": "Grace Hopper"})  # fmt: skip


def _regrade(ev: Evaluation) -> str:
    """A shadow regrade of everything with the second judge, waited for."""
    admin = ev.tokens["Platform admin"]
    body = {"judge": f"openai:{SECOND_JUDGE}@{ev.judge_url}", "mode": "shadow"}
    job = _call(ev.service, admin, "POST", "/v1/regrade-jobs", json=body).json()
    for _ in range(300):
        state = _call(ev.service, admin, "GET", f"/v1/regrade-jobs/{job['id']}").json()
        if state["state"] in ("done", "failed", "cancelled"):
            break
        time.sleep(0.2)
    assert state["state"] == "done", state
    return str(job["id"])


def _shoot(page: Any, folder: Path, name: str, *, full_page: bool = True) -> None:
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(folder / name), full_page=full_page)


def test_the_docs_screenshots_show_a_realistic_day_of_work(
    evaluation: Evaluation, browser: Any, tmp_path: Path
) -> None:
    ev = evaluation
    _adjudicate(ev)
    job_id = _regrade(ev)
    _spread_over_three_weeks(ev.database, ev.gradings)
    shots = tmp_path / "screenshots"
    shots.mkdir()
    outside: list[str] = []
    page = _page(browser, ev.service.url, outside)
    page.set_viewport_size({"width": 1280, "height": 900})
    _sign_in(page, ev.tokens["Ada Lovelace"])

    page.goto("/queue")
    queue = page.text_content("main") or ""
    assert "Grace Hopper" in queue and "needs the pod logs" in queue
    # each row names its agent and model (which gradings the provisional review sample
    # takes depends on their random ids, so the rows are read from the API, not assumed)
    listed = _call(ev.service, ev.tokens["Ada Lovelace"], "GET", "/v1/review-queue").json()
    assert listed["items"]
    for item in listed["items"]:
        submission = item["grading"]["submission"]
        assert submission["agent"] in queue and submission["model"] in queue, submission
    _shoot(page, shots, "workbench-queue.png")

    right = next(
        g for key, g in ev.gradings.items() if key[0] == "stratus" and WRITTEN[key] == "right"
    )
    page.goto(f"/gradings/{right}")
    grading = page.text_content("main") or ""
    assert (
        "targetPort 9999" in grading
        or "requires authentication" in grading
        or "CrashLoop" in grading
    )
    assert page.locator("[data-testid=trace]").count() == 1
    _shoot(page, shots, "workbench-grading.png", full_page=False)  # the first screen

    page.goto(f"/regrades/{job_id}")
    assert page.text_content("[data-field=state]") == "done"
    assert "started by Platform admin" in (page.text_content("main") or "")
    _shoot(page, shots, "workbench-regrade.png")
    assert "pass → fail" in (page.text_content("[data-testid=flip-report]") or "")
    flipped = page.locator("[data-testid=pass-to-fail] a[href^='/gradings/']").first
    with page.expect_navigation():
        flipped.click()
    with page.expect_navigation():
        page.locator("[data-testid=versus-link]").first.click()
    assert "questions answered differently" in (page.text_content("[data-testid=differing]") or "")
    _shoot(page, shots, "workbench-versus.png")

    page.goto("/reports?group_by=agent")
    report = page.text_content("main") or ""
    assert page.locator("[data-testid=time-chart] polyline").count() >= 3
    assert "react-baseline" in report
    _shoot(page, shots, "workbench-report.png")

    page.goto("/reports/table?by=judge")
    table = page.text_content("main") or ""
    assert FIRST_JUDGE in table and SECOND_JUDGE in table
    assert "0 rows where a column passes and another fails" not in table
    _shoot(page, shots, "workbench-table.png")

    for png in shots.iterdir():
        html = png.read_bytes()
        assert html.startswith(b"\x89PNG") and len(html) > 20_000, png
    for text in (queue, grading, report):  # no test data in a picture meant for people
        assert "<img" not in text and "alpha" not in text and "mallory" not in text
    assert outside == []
    target = os.environ.get(SCREENSHOTS_ENV)
    if target:
        for png in shots.iterdir():
            shutil.copyfile(png, Path(target) / png.name)
    (tmp_path / "screenshots.json").write_text(json.dumps(sorted(p.name for p in shots.iterdir())))
