"""A ground truth with a typo, fixed, then regraded: the normal flow of a benchmark team.

Every submission and grading names the scenario version it was graded against; a
regrade grades against each submission's own version unless asked for the newest.
Reports filter by scenario set.
"""

from __future__ import annotations

import asyncio
import csv
import html
import io
import json
import re
from typing import Any

import pytest

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import JudgeRequest
from tests.web.conftest import sign_in

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

SPEC = "scripted:typo-sensitive"
TYPO = "namespace=hotel-reservaton"
TRUTH = "[fault_spec] component=deployment/user-service; {ns} || USER_PORT=9999 replaced 8086"
DIAGNOSIS = "deployment/user-service in hotel-reservation listens on USER_PORT=9999, not 8086"


def _judge(request: JudgeRequest) -> str:
    """Yes to everything unless the ground truth it was shown carries the typo."""
    typo = any(TYPO in m.content for m in request.messages)
    return scripted_reply(request, yes=set() if typo else None)


async def _finished(client: Any, headers: dict[str, str], job_id: str) -> Any:
    for _ in range(600):  # 30 s
        body = (await client.get(f"/v1/regrade-jobs/{job_id}", headers=headers)).json()
        if body["state"] in ("done", "failed", "cancelled"):
            return body
        await asyncio.sleep(0.05)
    raise AssertionError(f"job still {body['state']}: {body}")


async def _current(client: Any, headers: dict[str, str], scenario_id: str) -> Any:
    page = await client.get("/v1/gradings", params={"scenario_id": scenario_id}, headers=headers)
    (only,) = page.json()["items"]
    return only


async def _exports(client: Any, admin: dict[str, str]) -> dict[tuple[str, str], str]:
    """Every export format, with and without superseded gradings."""
    found = {}
    for fmt in ("csv", "jsonl", "sregym"):
        for every in ("true", "false"):
            params = {"format": fmt, "include_superseded": every}
            answer = await client.get("/v1/exports/gradings", params=params, headers=admin)
            found[(fmt, every)] = answer.text
    return found


def _assert_exports_name_versions(exports: dict[tuple[str, str], str]) -> None:
    """Every export names the version each grading was graded against (CSV: last column)."""
    for fmt in ("csv", "sregym"):
        rows = list(csv.reader(io.StringIO(exports[(fmt, "true")])))
        assert rows[0][-1] == "scenario_version" and [r[-1] for r in rows[1:]] == ["1", "2"]
        assert [r[-1] for r in csv.reader(io.StringIO(exports[(fmt, "false")]))][1:] == ["2"]
    lines = [json.loads(line) for line in exports[("jsonl", "true")].splitlines()]
    assert [g["scenario_version"] for g in lines] == [1, 2]


async def test_a_typo_fixed_then_regraded_against_the_newest_ground_truth(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    backend = ScriptedBackend([_judge] * 20)
    scenario = {"id": "hotel/user-port", "ground_truth": TRUTH.format(ns=TYPO), "set": "public"}
    async with api_client(judge=SPEC, backends={SPEC: backend}) as client:
        await client.post("/v1/scenarios", json=scenario, headers=admin)
        body = {"diagnosis": DIAGNOSIS, "scenario_id": "hotel/user-port"}
        first = (await client.post("/v1/submissions?wait=10", json=body, headers=agent)).json()
        as_admin = await _current(client, admin, "hotel/user-port")
        etag = (await client.get("/v1/scenarios/hotel/user-port", headers=admin)).headers["ETag"]
        fix = {"ground_truth": TRUTH.format(ns="namespace=hotel-reservation"), "note": "typo"}
        fixed = await client.put(
            "/v1/scenarios/hotel/user-port", json=fix, headers={**admin, "If-Match": etag}
        )
        job_body = {"filter": {"scenario_id": "hotel/user-port"}, "mode": "promote"}
        as_sent = await client.post("/v1/regrade-jobs", json=job_body, headers=admin)
        dry = await client.post(
            "/v1/regrade-jobs",
            json={**job_body, "ground_truth": "latest", "dry_run": True},
            headers=admin,
        )
        job = await client.post(
            "/v1/regrade-jobs", json={**job_body, "ground_truth": "latest"}, headers=admin
        )
        done = await _finished(client, admin, job.json()["id"])
        regraded = await _current(client, admin, "hotel/user-port")
        seen_by_agent = await client.get(f"/v1/gradings/{regraded['id']}", headers=agent)
        exports = await _exports(client, admin)
        await sign_in(client, admin)
        pages = [
            (await client.get(path)).text
            for path in (
                f"/gradings/{regraded['id']}",
                f"/gradings/{regraded['id']}/label",
                f"/gradings/{as_admin['id']}",
            )
        ]
    assert first["passed"] is False and first["status"] == "graded"
    assert as_admin["scenario_version"] == 1 and as_admin["submission"]["scenario_version"] == 1
    assert fixed.json()["outcome"] == "new_version" and fixed.json()["version"] == 2
    # without a rubric, a judge or the newest ground truth there is nothing to regrade with
    assert as_sent.status_code == 422 and as_sent.json()["errors"][0]["field"] == "rubric"
    assert dry.json()["state"] == "done" and dry.json()["ground_truth"] == "latest"
    assert done["state"] == "done" and done["ground_truth"] == "latest" and done["done"] == 1
    assert regraded["passed"] is True
    assert regraded["scenario_version"] == 2
    _assert_exports_name_versions(exports)
    assert regraded["submission"]["scenario_version"] == 1  # what it was first graded with
    shown = [m.content for r in backend.requests for m in r.messages]
    assert sum(TYPO in text for text in shown) == 1  # the dry run asked no judge
    agent_view = seen_by_agent.json()
    assert "scenario_version" not in agent_view
    assert "scenario_version" not in agent_view["submission"]
    assert "scenario_version" in agent_view["withheld"]
    # an adjudicator's pages show the ground truth each grading was judged against
    assert [_truth_shown(page) for page in pages] == [
        (TRUTH.format(ns="namespace=hotel-reservation"), "version 2"),
        (TRUTH.format(ns="namespace=hotel-reservation"), "version 2"),
        (TRUTH.format(ns=TYPO), "version 1"),
    ]


def _truth_shown(page: str) -> tuple[str, str]:
    """The ground truth a grading page (or its blind label form) shows, and its version."""
    text = re.search(r'<pre class="text"[^>]*>(.*?)</pre>', page, re.S)
    version = re.search(r'data-testid="ground-truth-version">(.*?)</span>', page)
    assert text is not None and version is not None, page[:2000]
    return html.unescape(text.group(1)), version.group(1)


async def test_an_as_submitted_regrade_keeps_the_old_version(api_client: Any, tokens: Any) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    backend = ScriptedBackend([_judge] * 20)
    scenario = {"id": "s1", "ground_truth": TRUTH.format(ns=TYPO)}
    async with api_client(judge=SPEC, backends={SPEC: backend}) as client:
        await client.post("/v1/scenarios", json=scenario, headers=admin)
        body = {"diagnosis": DIAGNOSIS, "scenario_id": "s1"}
        await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        fix = {"ground_truth": TRUTH.format(ns="namespace=hotel-reservation")}
        await client.put("/v1/scenarios/s1", json=fix, headers={**admin, "If-Match": '"1"'})
        job = await client.post(
            "/v1/regrade-jobs",
            json={"filter": {"scenario_id": "s1"}, "judge": SPEC, "mode": "promote"},
            headers=admin,
        )
        done = await _finished(client, admin, job.json()["id"])
        regraded = await _current(client, admin, "s1")
    assert done["ground_truth"] == "as_submitted" and done["done"] == 1
    assert regraded["passed"] is False and regraded["scenario_version"] == 1


async def test_reports_exports_and_regrades_filter_by_scenario_set(
    api_client: Any, tokens: Any
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    sets = {"pub-1": "public", "pub-2": "public", "held-1": "held-out"}
    async with api_client() as client:
        for scenario_id, scenario_set in sets.items():
            made = {"id": scenario_id, "ground_truth": "[fault_spec] x", "set": scenario_set}
            await client.post("/v1/scenarios", json=made, headers=admin)
            body = {"diagnosis": "x is down", "scenario_id": scenario_id}
            await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        rates = await client.get(
            "/v1/stats/pass-rates", params={"scenario_set": "held-out"}, headers=admin
        )
        every = await client.get("/v1/stats/pass-rates", headers=admin)
        compare = await client.get(
            "/v1/stats/compare",
            params={"a.scenario_set": "public", "b.scenario_set": "held-out"},
            headers=admin,
        )
        export = await client.get(
            "/v1/exports/gradings",
            params={"scenario_set": "public", "format": "jsonl"},
            headers=admin,
        )
        dry = await client.post(
            "/v1/regrade-jobs",
            json={"filter": {"scenario_set": "public"}, "judge": "scripted:fail", "dry_run": True},
            headers=admin,
        )
    assert rates.status_code == 200, rates.text
    assert rates.json()["overall"]["n"] == 1 and every.json()["overall"]["n"] == 3
    assert compare.status_code == 200, compare.text
    assert [compare.json()[arm]["outcome"]["n"] for arm in ("a", "b")] == [2, 1]
    assert len(export.text.strip().splitlines()) == 2
    assert dry.json()["total"] == 2


#: seven yes, one dimension short of three: a decisive pass, so one the review queue holds
_SEVEN = {"D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1"}


def _decisive_judge(request: JudgeRequest) -> str:
    """No to everything against the typo; a decisive pass against the fixed text."""
    typo = any(TYPO in m.content for m in request.messages)
    return scripted_reply(request, yes=set() if typo else _SEVEN)


async def test_the_blind_queue_shows_the_ground_truth_a_regrade_was_judged_against(
    api_client: Any, tokens: Any
) -> None:
    """Blind labels are what agreement is measured on: after a regrade against the
    newest ground truth, the blind queue gives the text the judge was shown."""
    admin, agent = await tokens("admin"), await tokens("submitter", "agent-1")
    adjudicator = await tokens("adjudicator", "Ada")
    backend = ScriptedBackend([_decisive_judge] * 20)
    scenario = {"id": "hotel/user-port", "ground_truth": TRUTH.format(ns=TYPO)}
    async with api_client(judge=SPEC, backends={SPEC: backend}) as client:
        await client.post("/v1/scenarios", json=scenario, headers=admin)
        body = {"diagnosis": DIAGNOSIS, "scenario_id": "hotel/user-port"}
        await client.post("/v1/submissions?wait=10", json=body, headers=agent)
        fix = {"ground_truth": TRUTH.format(ns="namespace=hotel-reservation"), "note": "typo"}
        await client.put(
            "/v1/scenarios/hotel/user-port", json=fix, headers={**admin, "If-Match": '"1"'}
        )
        job_body = {"filter": {"scenario_id": "hotel/user-port"}, "mode": "promote"}
        job = await client.post(
            "/v1/regrade-jobs", json={**job_body, "ground_truth": "latest"}, headers=admin
        )
        assert (await _finished(client, admin, job.json()["id"]))["done"] == 1
        regraded = await _current(client, adjudicator, "hotel/user-port")
        blind = await client.get("/v1/review-queue?blind=true", headers=adjudicator)
    assert regraded["scenario_version"] == 2 and regraded["yes_count"] == 7
    (item,) = [i for i in blind.json()["items"] if i["grading_id"] == regraded["id"]]
    assert item["ground_truth"] == TRUTH.format(ns="namespace=hotel-reservation")
