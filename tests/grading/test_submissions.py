"""Submitting diagnoses and reading their gradings over HTTP."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from api.grading.intake import accept_submission
from api.service.principal import Principal
from api.service.schemas import SubmissionCreate
from api.service.services import Services, intake_at_once
from api.service.settings import DEFAULT_RUBRIC_DIR
from storage import is_postgres
from storage.gradings import GradingReads
from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, count_submissions

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def test_submit_and_wait_returns_the_graded_grading_object(
    api_client: Any, tokens: Any
) -> None:
    headers = await tokens("submitter")
    async with api_client() as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "agent": "a1", "model": "m1"},
            headers=headers,
        )
    assert response.status_code == 201, response.text
    grading = response.json()
    assert grading["status"] == "graded"
    assert grading["passed"] is True and grading["judge_passed"] is True
    assert grading["yes_count"] == 9 and grading["composite"] == 1.0
    assert grading["rubric"]["id"] == "sregym-rca" and grading["rubric"]["version"].startswith(
        "v1+"
    )
    assert grading["judge"] == {"backend": "scripted", "model": "pass"}
    assert [a["question_id"] for a in grading["answers"]] == IDS
    first = grading["answers"][0]
    assert set(first) >= {
        "question_id",
        "dimension_id",
        "answer",
        "judge_answer",
        "evidence",
        "evidence_verified",
        "confidence",
        "overridden",
    }
    assert grading["dimensions"][0] == {
        "id": "D1",
        "name": "Fault localization",
        "yes": 3,
        "total": 3,
    }
    assert grading["needs_review"] is False
    assert grading["submission"]["ground_truth"] == TRUTH  # the submitter sent it
    assert response.headers["location"] == f"/v1/gradings/{grading['id']}"


async def test_submit_without_wait_is_202_then_graded(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    async with api_client() as client:
        response = await client.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=headers
        )
        assert response.status_code == 202
        assert response.json()["status"] == "pending"
        location = response.headers["location"]
        for _ in range(100):
            grading = (await client.get(location, headers=headers)).json()
            if grading["status"] != "pending":
                break
            await asyncio.sleep(0.05)
    assert grading["status"] == "graded"


async def test_a_stored_submission_is_202_with_its_location_when_the_wait_cannot_read_it(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A submission stored before the database stopped answering the ``?wait=`` reads is
    answered 202 with ``Location``, never a 503 that would have the client store it twice."""
    headers = await tokens("submitter")

    async def dropped(self: GradingReads, grading_id: str) -> Any:
        raise OperationalError("SELECT grading", {}, Exception("server closed the connection"))

    async with api_client() as client:
        monkeypatch.setattr(
            GradingReads, "get", dropped
        )  # the store commits; the wait's read fails
        response = await client.post(
            "/v1/submissions?wait=2",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=headers,
        )
    assert await count_submissions(engine) == 1
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "pending"
    assert response.headers["location"] == f"/v1/gradings/{response.json()['id']}"


async def test_scenario_ground_truth_is_hidden_from_submitters(
    api_client: Any, tokens: Any
) -> None:
    admin, submitter = await tokens("admin"), await tokens("submitter")
    async with api_client() as client:
        created = await client.post(
            "/v1/scenarios",
            json={"id": "hotel/user-port", "ground_truth": TRUTH, "title": "wrong port"},
            headers=admin,
        )
        assert created.status_code == 201, created.text
        again = await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": "x"}, headers=admin
        )
        assert again.status_code == 409
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "scenario_id": "hotel/user-port"},
            headers=submitter,
        )
        grading = response.json()
        assert response.status_code == 201
        assert "ground_truth" not in grading["submission"]
        assert TRUTH not in response.text
        as_admin = (await client.get(f"/v1/gradings/{grading['id']}", headers=admin)).json()
        assert as_admin["submission"]["ground_truth"] == TRUTH
        forbidden = await client.post(
            "/v1/scenarios", json={"id": "x", "ground_truth": "y"}, headers=submitter
        )
        assert forbidden.status_code == 403


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ground_truth": TRUTH}, "diagnosis"),
        ({"diagnosis": DIAGNOSIS}, "scenario_id"),
        ({"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "scenario_id": "s"}, "scenario_id"),
        ({"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "attempt": "first"}, "attempt"),
        ({"diagnosis": 42, "ground_truth": TRUTH}, "diagnosis"),
        ({"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "colour": "red"}, "colour"),
        ({"diagnosis": DIAGNOSIS, "scenario_id": "no-such-scenario"}, "scenario_id"),
        ({"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "rubric": "nope"}, "rubric"),
        ({"diagnosis": "a\u0000b", "ground_truth": TRUTH}, "diagnosis"),
        ({"diagnosis": "x" * 70_000, "ground_truth": TRUTH}, "diagnosis"),
    ],
)
async def test_bad_submissions_are_422_naming_the_field_and_store_nothing(
    api_client: Any, tokens: Any, engine: Engine, body: dict[str, Any], field: str
) -> None:
    headers = await tokens("submitter")
    before = await count_submissions(engine)
    async with api_client() as client:
        response = await client.post("/v1/submissions", json=body, headers=headers)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["status"] == 422
    assert any(field == e["field"] for e in problem["errors"]), problem
    assert TRUTH not in response.text
    assert await count_submissions(engine) == before


async def test_non_json_and_oversized_bodies(api_client: Any, tokens: Any, engine: Engine) -> None:
    headers = await tokens("submitter")
    async with api_client(max_body_bytes=8192) as client:
        broken = await client.post(
            "/v1/submissions",
            content=b"{not json",
            headers={**headers, "content-type": "application/json"},
        )
        assert broken.status_code == 400
        assert broken.headers["content-type"].startswith("application/problem+json")
        huge = await client.post(
            "/v1/submissions",
            json={"diagnosis": "x" * 20_000, "ground_truth": TRUTH},
            headers=headers,
        )
        assert huge.status_code == 413
        assert huge.headers["content-type"].startswith("application/problem+json")
    assert await count_submissions(engine) == 0


async def test_every_route_but_health_needs_a_token(api_client: Any) -> None:
    async with api_client() as client:
        for method, path in [
            ("POST", "/v1/submissions"),
            ("GET", "/v1/gradings"),
            ("GET", "/v1/gradings/abc"),
            ("POST", "/v1/scenarios"),
            ("GET", "/v1/rubrics"),
        ]:
            response = await client.request(method, path, json={})
            assert response.status_code == 401, path
            assert response.headers["content-type"].startswith("application/problem+json")
        bad = await client.get("/v1/rubrics", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        assert (await client.get("/healthz")).status_code == 200
        schema = await client.get("/schema/openapi.json")
        assert schema.status_code == 200
        assert schema.json()["openapi"].startswith("3.1")


async def test_submitters_read_only_their_own_gradings(api_client: Any, tokens: Any) -> None:
    alice, bob = await tokens("submitter", "alice"), await tokens("submitter", "bob")
    adjudicator = await tokens("adjudicator")
    async with api_client() as client:
        grading = (
            await client.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
                headers=alice,
            )
        ).json()
        assert (await client.get(f"/v1/gradings/{grading['id']}", headers=bob)).status_code == 404
        assert (
            await client.get(f"/v1/gradings/{grading['id']}", headers=adjudicator)
        ).status_code == 200
        assert (await client.get("/v1/gradings", headers=bob)).json()["items"] == []
        assert len((await client.get("/v1/gradings", headers=alice)).json()["items"]) == 1


async def test_idempotency_key_replays_or_conflicts(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    headers = {**(await tokens("submitter")), "Idempotency-Key": "run-7-attempt-1"}
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client() as client:
        first = await client.post("/v1/submissions", json=body, headers=headers)
        second = await client.post("/v1/submissions", json=body, headers=headers)
        assert second.json()["id"] == first.json()["id"]
        assert second.headers.get("idempotent-replayed") == "true"
        conflict = await client.post(
            "/v1/submissions", json={**body, "diagnosis": "other"}, headers=headers
        )
        assert conflict.status_code == 409
        assert conflict.headers["content-type"].startswith("application/problem+json")
        assert conflict.json()["errors"][0]["field"] == "Idempotency-Key"
        for bad in ("", "k" * 257):  # no key, or one longer than is stored
            refused = await client.post(
                "/v1/submissions", json=body, headers={**headers, "Idempotency-Key": bad}
            )
            assert refused.status_code == 422
            assert refused.json()["errors"][0]["field"] == "Idempotency-Key"
    assert await count_submissions(engine) == 1


async def test_the_same_key_with_another_rubric_named_is_a_conflict(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """The rubric named is part of the request: the first grading (by another rubric) is
    not an answer to it."""
    shipped = (DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text()
    (tmp_path / "sregym-rca.yaml").write_text(shipped)
    (tmp_path / "lenient.yaml").write_text(shipped.replace("id: sregym-rca", "id: lenient", 1))
    headers = {**(await tokens("adjudicator")), "Idempotency-Key": "k-1"}
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client(rubric_dir=tmp_path) as client:
        first = await client.post("/v1/submissions", json=body, headers=headers)
        other = await client.post(
            "/v1/submissions", json={**body, "rubric": "lenient"}, headers=headers
        )
        named = {**body, "rubric": "lenient"}
        again = await client.post(
            "/v1/submissions", json=named, headers={**headers, "Idempotency-Key": "k-2"}
        )
        replayed = await client.post(
            "/v1/submissions", json=named, headers={**headers, "Idempotency-Key": "k-2"}
        )
    assert first.status_code == 202 and other.status_code == 409, other.text
    assert (
        replayed.json()["id"] == again.json()["id"] and replayed.json()["rubric"]["id"] == "lenient"
    )
    assert await count_submissions(engine) == 2


async def test_a_replay_stays_a_replay_after_its_scenario_got_a_new_ground_truth(
    api_client: Any, tokens: Any
) -> None:
    """The scenario's ground truth is not part of what the submitter sent: a 409 would
    also tell it that the hidden ground truth changed."""
    admin = await tokens("admin")
    agent = {**(await tokens("submitter")), "Idempotency-Key": "run-1"}
    body = {"diagnosis": DIAGNOSIS, "scenario_id": "hotel/user-port"}
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        first = await client.post("/v1/submissions", json=body, headers=agent)
        put = await client.put(
            "/v1/scenarios/hotel/user-port",
            json={"ground_truth": TRUTH.replace("9999", "9998")},
            headers={**admin, "If-Match": '"1"'},
        )
        assert put.status_code == 200, put.text
        replay = await client.post("/v1/submissions", json=body, headers=agent)
        other = await client.post(
            "/v1/submissions", json={**body, "agent": "another"}, headers=agent
        )
    assert replay.status_code in (201, 202), replay.text
    assert replay.json()["id"] == first.json()["id"]
    assert replay.headers["idempotent-replayed"] == "true"
    assert other.status_code == 409  # what was sent differs: still a conflict


@pytest.mark.parametrize(
    "tightened",
    [{"self_preference": "refuse"}, {"inline_ground_truth": "deny"}],
    ids=["self_preference_refuse", "inline_ground_truth_deny"],
)
async def test_a_replay_is_answered_after_a_policy_tightened_and_new_requests_are_refused(
    api_client: Any, tokens: Any, engine: Engine, tightened: dict[str, str]
) -> None:
    """A harness whose answer was lost retries with the same key after the service
    restarted under a stricter policy: it is told what the first request stored (that
    submission is graded), while a new request is refused by the new policy."""
    judge = "openai:qwen2.5-1.5b-instruct"
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "model": "qwen3:8b"}
    agent = {**(await tokens("submitter")), "Idempotency-Key": "run-7-attempt-1"}
    async with api_client(judge=judge, start_workers=False) as client:
        first = await client.post("/v1/submissions", json=body, headers=agent)
        assert first.status_code == 202, first.text
    async with api_client(judge=judge, start_workers=False, **tightened) as client:
        again = await client.post("/v1/submissions", json=body, headers=agent)
        fresh = await client.post(
            "/v1/submissions", json=body, headers={**agent, "Idempotency-Key": "run-8"}
        )
    assert again.status_code == 202, again.text
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert fresh.status_code in (403, 422), fresh.text
    assert await count_submissions(engine) == 1


async def test_an_unparseable_judge_gives_an_unscored_grading(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    async with api_client(judge="scripted:garbage") as client:
        grading = (
            await client.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
                headers=headers,
            )
        ).json()
    assert grading["status"] == "unscored"
    assert grading["unscored_reason"] == "unparseable_reply"
    assert grading["passed"] is None and grading["needs_review"] is True


async def test_real_openai_client_against_a_server_in_sregym_format(
    api_client: Any, tokens: Any
) -> None:
    from tests.support.judge_server import running_judge_server

    headers = await tokens("submitter")
    six = set(IDS[:6])
    with running_judge_server(default=sregym_reply(six, evidence="sets USER_PORT=9999")) as server:
        spec = f"openai:m@{server.openai_url}"
        async with api_client(judge=spec, backends={}) as client:
            response = await client.post(
                "/v1/submissions?wait=10",
                json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
                headers=headers,
            )
    grading = response.json()
    assert response.status_code == 201
    assert grading["passed"] is False and grading["yes_count"] == 6
    assert grading["judge"] == {"backend": "openai", "model": "m"}


async def test_a_flood_of_submissions_is_stored_a_few_at_a_time_and_every_one_is_kept(
    api_client: Any, engine: Engine
) -> None:
    """Intake yields the event loop to the graders: two submissions stored at a time on
    SQLite (one writer), four on PostgreSQL; the others wait and none is lost."""
    storing, most = 0, 0
    async with api_client(start_workers=False) as client:
        services: Services = client.app.state.services
        create = services.store.submissions.create

        async def watched_create(*args: Any, **kwargs: Any) -> Any:
            nonlocal storing, most
            storing += 1
            most = max(most, storing)
            try:
                await asyncio.sleep(0.02)  # a slow disk: the next ones arrive meanwhile
                return await create(*args, **kwargs)
            finally:
                storing -= 1

        services.store.submissions.create = watched_create  # type: ignore[method-assign]
        principal = Principal(id="flood", name="flood", role="submitter")
        data = SubmissionCreate(diagnosis=DIAGNOSIS, ground_truth=TRUTH)
        accepted = await asyncio.gather(
            *(accept_submission(services, data, principal=principal) for _ in range(12))
        )
    assert len({a.outcome.grading.id for a in accepted}) == 12
    assert most == intake_at_once(services.store) == (4 if is_postgres(engine) else 2)
    assert await count_submissions(engine) == 12
