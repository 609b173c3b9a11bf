"""A panel of two judges in the service: both votes stored, a split sent to review."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.engine import Engine

from api.grading import workers
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import JudgeRequest
from judge.errors import JudgeUnavailable
from storage.tables import GradingRecord, JudgeCallRecord
from tests.support.keyed_judges import (
    CLOUD_SHOWN,
    KEYS,
    LOCAL_SHOWN,
    PANEL_MODEL_SHOWN,
    graded_by_keyed_panel,
    keyed_panel,
)
from tests.support.submissions import first_set
from tests.web.conftest import sign_in

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
LOCAL = "openai:local@http://127.0.0.1:9/v1"
CLOUD = "openai:cloud@http://127.0.0.1:10/v1"


def _judge(yes: set[str], model: str) -> ScriptedBackend:
    def reply(request: JudgeRequest) -> str:
        return scripted_reply(request, yes=yes)

    return ScriptedBackend([reply] * 20, model=model)


async def _rows(engine: Engine, table: Any, grading_id: str) -> list[Any]:
    with engine.connect() as connection:
        query = select(table).where(table.grading_id == grading_id)
        return list((connection.execute(query)).mappings())


async def _votes(engine: Engine, grading_id: str) -> list[dict[str, Any]]:
    """The votes stored with the grading."""
    with engine.connect() as connection:
        query = select(GradingRecord.votes).where(GradingRecord.id == grading_id)
        return list(connection.execute(query).scalar_one())


async def test_a_panel_of_two_stores_both_votes_and_routes_a_split_to_review(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    backends = {LOCAL: _judge(set(IDS), "local"), CLOUD: _judge(set(IDS) - {"D2-Q2"}, "cloud")}
    async with api_client(judge=LOCAL, panel=f"{LOCAL},{CLOUD}", backends=backends) as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        assert response.status_code == 201, response.text
        grading = response.json()
        # a submitter learns which models judged, not where they run
        assert grading["judge"] == {"backend": "panel", "model": "openai:local+openai:cloud"}
        assert "judge_split" in grading["review_reasons"] and grading["needs_review"]
        answers = {a["question_id"]: a for a in grading["answers"]}
        split = answers["D2-Q2"]
        assert split["judge_answer"] == "no" and split["confidence"] == 0.5
        assert {(v["judge"], v["answer"]) for v in split["votes"]} == {
            ("openai:local", "yes"),
            ("openai:cloud", "no"),
        }
        assert "127.0.0.1" not in response.text
        assert all(len(a["votes"]) == 2 for a in grading["answers"])

        queue = await client.get("/v1/review-queue?reason=judge_split", headers=adjudicator)
        assert queue.status_code == 200, queue.text
        items = queue.json()["items"]
        assert [i["grading"]["id"] for i in items] == [grading["id"]]
        assert "judge_split" in items[0]["reasons"]
        adjudicated = items[0]["grading"]
        assert adjudicated["judge"] == {"backend": "panel", "model": f"{LOCAL}+{CLOUD}"}
        seen = {(v["judge"], v["answer"]) for a in adjudicated["answers"] for v in a["votes"]}
        assert (LOCAL, "yes") in seen and (CLOUD, "no") in seen
        # the export's grading objects carry the same votes, each naming its judge call
        admin = await tokens("admin")
        exported = await client.get("/v1/exports/gradings?format=jsonl", headers=admin)
        assert exported.status_code == 200, exported.text
        [line] = [json.loads(text) for text in exported.text.splitlines()]
        votes = [a["votes"] for a in adjudicated["answers"]]
        assert [a["votes"] for a in line["answers"]] == votes
        assert all(v["call_id"] for cast in votes for v in cast)

    votes = await _votes(engine, grading["id"])
    assert len(votes) == 18
    assert {v["judge_spec"] for v in votes} == {LOCAL, CLOUD}
    on_split = {v["judge_spec"]: v["answer"] for v in votes if v["question_id"] == "D2-Q2"}
    assert on_split == {LOCAL: True, CLOUD: False}
    calls = {c["id"]: c for c in await _rows(engine, JudgeCallRecord, grading["id"])}
    assert len(calls) == 2
    for vote in votes:  # every vote points at the stored call of its own judge
        call = calls[vote["call_id"]]
        assert vote["judge_spec"].startswith(f"openai:{call['model']}@")


async def test_the_grading_page_shows_each_members_vote(api_client: Any, tokens: Any) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    backends = {LOCAL: _judge(set(IDS), "local"), CLOUD: _judge(set(IDS) - {"D2-Q2"}, "cloud")}
    async with api_client(judge=LOCAL, panel=f"{LOCAL},{CLOUD}", backends=backends) as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        assert response.status_code == 201, response.text
        await sign_in(client, ada)
        page = await client.get(f"/gradings/{response.json()['id']}")
    assert page.status_code == 200, page.text
    tables = re.findall(r'<table class="votes">(.*?)</table>', page.text, re.S)
    assert len(tables) == 9  # one per answer, each with both members' votes
    split = next(t for t in tables if "<td>no</td>" in t)
    assert f"<td>{LOCAL}</td>" in split and f"<td>{CLOUD}</td>" in split


async def test_the_workbench_shows_where_each_member_runs_never_its_key(
    api_client: Any, tokens: Any
) -> None:
    """Members that take their keys in their base URLs' queries: the grading's page (the
    judge and each vote), the gradings list and the review queue show each member's
    address with the key masked."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**keyed_panel()) as client:
        grading_id = await graded_by_keyed_panel(client, agent)
        await sign_in(client, ada)
        paths = (f"/gradings/{grading_id}", "/gradings", "/queue")
        pages = {path: await client.get(path) for path in paths}
    for path, page in pages.items():
        assert page.status_code == 200, page.text
        assert f"panel:{html.escape(PANEL_MODEL_SHOWN)}" in page.text, path
        assert not any(key in page.text for key in KEYS), path
    own = pages[f"/gradings/{grading_id}"].text
    tables = re.findall(r'<table class="votes">(.*?)</table>', own, re.S)
    split = next(t for t in tables if "<td>no</td>" in t)
    assert f"<td>{LOCAL_SHOWN}</td>" in split and f"<td>{CLOUD_SHOWN}</td>" in split


async def test_samples_store_a_vote_per_sample(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent = await tokens("submitter")
    backends = {LOCAL: _judge(set(IDS), "local")}
    async with api_client(judge=LOCAL, judge_samples=3, backends=backends) as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        assert response.status_code == 201, response.text
        grading = response.json()
    assert "judge_split" not in grading["review_reasons"]
    votes = await _votes(engine, grading["id"])
    assert sorted({v["sample_index"] for v in votes}) == [0, 1, 2] and len(votes) == 27
    calls = await _rows(engine, JudgeCallRecord, grading["id"])
    assert sorted(c["params"]["seed"] for c in calls) == [0, 1, 2]
    assert {c["params"]["temperature"] for c in calls} == {0.7}


async def test_readiness_asks_every_panel_member(api_client: Any) -> None:
    backends = {LOCAL: _judge(set(IDS), "local"), CLOUD: _judge(set(IDS), "cloud")}
    async with api_client(judge=LOCAL, panel=f"{LOCAL},{CLOUD}", backends=backends) as client:
        body = (await client.get("/readyz")).json()
    assert body["judge"]["ok"] is True and body["judge"]["judge"] == "panel"
    assert [m["judge"] for m in body["judge"]["members"]] == [
        "openai:local",
        "openai:cloud",
    ]


async def test_readiness_fails_only_the_panel_member_that_is_away(
    api_client: Any, tokens: Any
) -> None:
    """After a grading waits for a panel's member that cannot be reached, ``/readyz``
    says that member is failing and the one that answered every call is not."""
    agent = await tokens("submitter")
    refusals = [JudgeUnavailable("connection refused") for _ in range(20)]
    backends = {LOCAL: _judge(set(IDS), "local"), CLOUD: ScriptedBackend(refusals, model="cloud")}
    async with api_client(
        judge=LOCAL, panel=f"{LOCAL},{CLOUD}", backends=backends, judge_max_attempts=1
    ) as client:
        response = await client.post(
            "/v1/submissions?wait=0.2",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        grading = await first_set(client, response.headers["location"], agent, "pending_reason")
        assert grading["pending_reason"].startswith("judge_unavailable")
        ready = (await client.get("/readyz")).json()
    members = {m["judge"]: m for m in ready["judge"]["members"]}
    assert members["openai:cloud"]["ok"] is False
    assert members["openai:local"]["ok"] is True, members["openai:local"]


async def test_the_asking_setting_overrides_the_rubric(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent = await tokens("submitter")
    backend = _judge(set(IDS), "local")
    async with api_client(
        judge=LOCAL, judge_asking="per_question", backends={LOCAL: backend}
    ) as client:
        response = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
        assert response.status_code == 201, response.text
        grading = response.json()
    assert grading["status"] == "graded" and grading["passed"] is True
    calls = await _rows(engine, JudgeCallRecord, grading["id"])
    assert len(calls) == 9 == len(backend.requests)
    votes = await _votes(engine, grading["id"])
    assert len({v["call_id"] for v in votes}) == 9  # each answer from its own call


def test_a_panel_setting_is_validated() -> None:
    with pytest.raises(ValidationError, match="panel"):
        Settings(panel="openai:a,nonsense")
    with pytest.raises(ValidationError, match="once"):
        Settings(panel=f"{LOCAL},{LOCAL}")
    with pytest.raises(ValidationError, match="once"):  # the same judge, spelled otherwise
        Settings(panel=f"{LOCAL},OpenAI:local@http://127.0.0.1:9/v1/")
    assert Settings(panel=f" {LOCAL} , {CLOUD} ").panel_specs == [LOCAL, CLOUD]


async def test_an_unscored_panel_grading_is_audited_under_the_panels_name(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A panel grading unscored by a fault of the service (``internal_error``) names in
    its ``grading.unscored`` event the judge the grading records: the panel and its
    members, never the panel spec read as one judge spec."""

    async def broken(*args: Any) -> Any:
        raise RuntimeError("a fault of the service's own")

    monkeypatch.setattr(workers, "confirmed", broken)
    agent, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    backends = {LOCAL: _judge(set(IDS), "local"), CLOUD: _judge(set(IDS), "cloud")}
    fast = {"judge_retry_seconds": 0.05, "poll_seconds": 0.05}
    async with api_client(judge=LOCAL, panel=f"{LOCAL},{CLOUD}", backends=backends, **fast) as c:
        response = await c.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=agent
        )
        assert response.status_code == 202, response.text
        location = response.headers["location"]
        await first_set(c, location, agent, "unscored_reason")
        grading = (await c.get(location, headers=adjudicator)).json()
        history = (await c.get(f"{location}/history", headers=adjudicator)).json()
    assert grading["unscored_reason"] == "internal_error"
    assert grading["judge"] == {"backend": "panel", "model": f"{LOCAL}+{CLOUD}"}
    [event] = [e for e in history["events"] if e["event"] == "grading.unscored"]
    assert event["payload"]["judge"] == grading["judge"]
