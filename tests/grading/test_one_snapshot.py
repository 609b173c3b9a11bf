"""Reading a grading is one transaction: the grading, its answers, overrides, tags and
votes come from one snapshot, so they agree with each other, and the read costs one
BEGIN, not one per part. The grading page (its related gradings, history and the tag
vocabulary too) is one transaction as well, and so is accepting a submission against a
registered scenario (its ground truth read, the submitter's attempts counted). The
grading object ``POST /v1/submissions`` answers with after a wait is read in one
snapshot too."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.grading import submission_routes
from tests.support.submissions import DIAGNOSIS, TRUTH, graded
from tests.support.transactions import QUIET, counting
from tests.web.conftest import sign_in

#: the engine matters here (its snapshot isolation): run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def test_reading_a_grading_is_one_transaction(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client() as client:
        grading = await graded(client, agent)
    async with api_client(**QUIET) as client:
        location = f"/v1/gradings/{grading['id']}"
        for headers in (agent, ada):
            assert (await client.get(location, headers=headers)).status_code == 200  # warm
            with counting(engine) as counted:
                response = await client.get(location, headers=headers)
            assert response.status_code == 200
            assert counted.transactions == 1, f"{counted} for one read of a grading"


async def test_the_grading_page_is_one_transaction(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client() as client:
        grading = await graded(client, agent)
    async with api_client(**QUIET) as client:
        await sign_in(client, ada)
        page = f"/gradings/{grading['id']}"
        assert (await client.get(page)).status_code == 200  # warm: session, rubric
        with counting(engine) as counted:
            response = await client.get(page)
        assert response.status_code == 200 and "Ada" in response.text
        # the signed-in session is looked up first, then the page is one snapshot
        assert counted.transactions == 2, f"{counted} for one grading page"


async def test_a_submission_to_a_registered_scenario_is_one_transaction(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    admin, agent = await tokens("admin"), await tokens("submitter")
    truth = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT is 9999"
    async with api_client(**QUIET) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "s1", "ground_truth": truth}, headers=admin
        )
        assert made.status_code == 201
        for n in range(2):  # the first one warms the token's cache and the rubric
            body = {"scenario_id": "s1", "diagnosis": f"geo listens on 9999, attempt {n}"}
            with counting(engine) as counted:
                sent = await client.post("/v1/submissions", json=body, headers=agent)
            assert sent.status_code == 202, sent.text
        assert counted.transactions == 1, f"{counted} for one submission"
        stored = (await client.get(f"/v1/gradings/{sent.json()['id']}", headers=admin)).json()
    assert stored["submission"]["ground_truth"] == truth
    assert stored["submission"]["scenario_version"] == 1


async def test_a_waited_answer_shows_an_override_with_its_verdict_and_revision(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission sent again with its ``Idempotency-Key`` (``?wait``) is answered with
    its grading object, read in one snapshot as ``GET /v1/gradings/{id}`` reads it: an
    adjudicator's verdict override that lands while the answer is being made shows in
    it whole (``overrides``, ``verdict_override``, the verdict and the revision the
    ETag names) or not at all."""
    admin, ada = await tokens("admin"), await tokens("adjudicator", "Ada")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    key = {"Idempotency-Key": "run-1"}
    async with api_client() as client:
        first = await client.post("/v1/submissions?wait=10", json=body, headers={**admin, **key})
        assert first.status_code == 201, first.text
        grading = first.json()
        location = f"/v1/gradings/{grading['id']}"
        verdict = "fail" if grading["passed"] else "pass"
        original = submission_routes.wait_for_grading

        async def override_meanwhile(*args: Any, **kwargs: Any) -> Any:
            view = await original(*args, **kwargs)
            made = await client.post(
                f"{location}/overrides",
                json={"verdict": verdict, "reason": "the human decides"},
                headers={**ada, "If-Match": f'"{grading["revision"]}"'},
            )
            assert made.status_code == 201, made.text
            return view

        monkeypatch.setattr(submission_routes, "wait_for_grading", override_meanwhile)
        again = await client.post("/v1/submissions?wait=10", json=body, headers={**admin, **key})
        monkeypatch.undo()
        now = await client.get(location, headers=admin)
    assert again.status_code == 201, again.text
    answer = again.json()
    if answer["overrides"]:  # the override is shown: so are its verdict and revision
        assert answer["verdict_override"] == verdict
        assert answer["passed"] is (verdict == "pass"), answer
        assert answer["revision"] == now.json()["revision"]
        assert again.headers["ETag"] == now.headers["ETag"]
    else:
        assert answer["passed"] is grading["passed"]
