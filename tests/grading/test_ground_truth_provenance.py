"""Provenance of ground truth: who may send one, which rubric a submitter may ask for,
and a self-supplied ground truth never posing as a registered scenario (issue 19, item 2).

Before: a submission with an inline ground truth its submitter wrote, and metadata
naming a registered scenario, passed, counted in pass rates beside the scenario's
gradings and was exported in SREGym format under that scenario's ``problem_id``; a
submitter could pick any loaded rubric, a lenient one included.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from judge.rubric import DEFAULT_RUBRIC_DIR
from tests.support.submissions import DIAGNOSIS, TRUTH, count_submissions

SCENARIO = "hotel/user-port"
#: what a self-grading submitter sends: its own easy answer, posing as the scenario
SELF_GRADED = {
    "diagnosis": "easy is broken",
    "ground_truth": "[fault_spec] component=deployment/easy; namespace=x || easy is broken",
    "metadata": {"problem_id": SCENARIO},
}


async def _register(client: Any, admin: dict[str, str]) -> None:
    response = await client.post(
        "/v1/scenarios", json={"id": SCENARIO, "ground_truth": TRUTH}, headers=admin
    )
    assert response.status_code == 201, response.text


async def _post(client: Any, headers: dict[str, str], body: dict[str, Any]) -> Any:
    return await client.post("/v1/submissions?wait=10", json=body, headers=headers)


@pytest.mark.parametrize("policy", ["deny", "per_token"])
async def test_a_ground_truth_not_allowed_is_403_and_stores_nothing(
    api_client: Any, tokens: Any, engine: Engine, policy: str
) -> None:
    agent = await tokens("submitter")
    async with api_client(inline_ground_truth=policy) as client:
        response = await _post(client, agent, SELF_GRADED)
        assert response.status_code == 403, response.text
        problem = response.json()
        assert problem["errors"][0]["field"] == "ground_truth"
        assert "scenario_id" in problem["detail"]
        assert await count_submissions(engine) == 0


async def test_per_token_admits_the_tokens_an_admin_granted(api_client: Any, tokens: Any) -> None:
    admin = await tokens("admin")
    async with api_client(inline_ground_truth="per_token") as client:
        created = await client.post(
            "/v1/tokens",
            json={"name": "sregym-conductor", "role": "submitter", "inline_ground_truth": True},
            headers=admin,
        )
        assert created.status_code == 201, created.text
        assert created.json()["inline_ground_truth"] is True
        granted = {"Authorization": f"Bearer {created.json()['token']}"}
        body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
        assert (await _post(client, granted, body)).status_code == 201
        assert (await _post(client, admin, body)).status_code == 201
        loose = await client.post(
            "/v1/tokens",
            json={"name": "x", "role": "submitter", "inline_ground_truth": "yes"},
            headers=admin,
        )
        assert loose.status_code == 400 or loose.status_code == 422


async def test_a_self_supplied_ground_truth_never_poses_as_a_scenario(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin")
    async with api_client() as client:  # the default: allow
        await _register(client, admin)
        own = await _post(client, agent, SELF_GRADED)
        assert own.status_code == 201, own.text
        assert own.json()["submission"]["ground_truth_source"] == "inline"
        registered = await _post(client, agent, {"diagnosis": DIAGNOSIS, "scenario_id": SCENARIO})
        assert registered.json()["submission"]["ground_truth_source"] == "scenario"
        # the hash of a hidden ground truth is derived from it: never shown to a submitter
        assert "ground_truth_sha256" not in registered.json()["submission"]
        seen = await client.get(f"/v1/gradings/{registered.json()['id']}", headers=admin)
        assert len(seen.json()["submission"]["ground_truth_sha256"]) == 64

        export = await client.get("/v1/exports/gradings?format=sregym", headers=admin)
        rows = {r["grading_id"]: r for r in csv.DictReader(io.StringIO(export.text))}
        assert rows[registered.json()["id"]]["problem_id"] == SCENARIO
        assert rows[own.json()["id"]]["problem_id"] == f"inline:{SCENARIO}"
        assert rows[own.json()["id"]]["ground_truth_source"] == "inline"

        only = await client.get(
            "/v1/stats/pass-rates",
            params={"ground_truth_source": "scenario", "group_by": "source"},
            headers=admin,
        )
        assert only.status_code == 200, only.text
        assert only.json()["overall"]["total"] == 1
        assert [g["key"]["source"] for g in only.json()["groups"]] == ["scenario"]
        both = await client.get("/v1/stats/pass-rates?group_by=source", headers=admin)
        assert sorted(g["key"]["source"] for g in both.json()["groups"]) == ["inline", "scenario"]
        bad = await client.get("/v1/stats/pass-rates?ground_truth_source=mine", headers=admin)
        assert bad.status_code in (400, 422)

        reserved = await client.post(
            "/v1/scenarios", json={"id": "inline:x", "ground_truth": TRUTH}, headers=admin
        )
        assert reserved.status_code == 422, reserved.text


async def test_submitters_ask_only_for_rubrics_an_admin_allowed(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    shipped = (DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text()
    (tmp_path / "sregym-rca.yaml").write_text(shipped)
    lenient = shipped.replace("id: sregym-rca", "id: lenient", 1)
    (tmp_path / "lenient.yaml").write_text(lenient)
    agent, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "rubric": "lenient"}
    async with api_client(rubric_dir=tmp_path) as client:
        refused = await _post(client, agent, body)
        assert refused.status_code == 403, refused.text
        assert refused.json()["errors"][0]["field"] == "rubric"
        assert await count_submissions(engine) == 0
        assert (await _post(client, adjudicator, body)).status_code == 201
    async with api_client(rubric_dir=tmp_path, submitter_rubrics="lenient") as client:
        assert (await _post(client, agent, body)).status_code == 201
