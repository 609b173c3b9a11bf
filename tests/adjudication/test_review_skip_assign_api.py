"""Skipping a queue item with a note, and assigning items to an adjudicator, over the API:
who may, what the queue then shows (names, never token ids), and the audit trail."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, graded, scripted_judge

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: a failing grading whose quotes are not in the diagnosis: queued, and not held
QUEUED = sregym_reply(set(IDS[:3]), evidence="not in the diagnosis at all")


async def _queue(client: Any, headers: dict[str, str], query: str = "") -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/review-queue{query}", headers=headers)
    assert answer.status_code == 200, answer.text
    return list(answer.json()["items"])


def _item(items: list[dict[str, Any]], grading_id: str) -> dict[str, Any]:
    return next(i for i in items if i["grading"]["id"] == grading_id)


async def _history(client: Any, headers: dict[str, str], grading_id: str) -> list[Any]:
    answer = await client.get(f"/v1/gradings/{grading_id}/history", headers=headers)
    assert answer.status_code == 200, answer.text
    return [e for e in answer.json()["events"] if e["event"].startswith("review.")]


async def _token_id(client: Any, admin: dict[str, str], name: str) -> str:
    listed = (await client.get("/v1/tokens", headers=admin)).json()
    return str(next(t["id"] for t in listed if t["name"] == name))


async def test_a_skip_leaves_a_note_gives_the_claim_back_and_is_audited(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(**scripted_judge(QUEUED, QUEUED)) as client:
        first = (await graded(client, agent, DIAGNOSIS + " 1"))["id"]
        second = (await graded(client, agent, DIAGNOSIS + " 2"))["id"]
        claimed = await client.post(f"/v1/review-queue/{first}/claim", json={}, headers=ada)
        assert claimed.status_code == 200
        assert first not in [i["grading"]["id"] for i in await _queue(client, bob)]

        note = "needs someone who knows <b>Kafka</b>"
        skipped = await client.post(
            f"/v1/review-queue/{first}/skip", json={"note": note}, headers=ada
        )
        assert skipped.status_code == 200, skipped.text
        assert skipped.json()["skipped"]["note"] == note
        assert skipped.json()["claimed_by"] is None  # Ada's claim is given back

        seen_by_bob = _item(await _queue(client, bob), first)  # back in Bob's queue
        assert seen_by_bob["skipped"]["by"] == "Ada" and seen_by_bob["skipped"]["note"] == note
        assert seen_by_bob["skipped"]["at"]
        blind = (await client.get("/v1/review-queue?blind=true", headers=bob)).json()["items"]
        assert next(i for i in blind if i["grading_id"] == first)["skipped"]["note"] == note

        # no note: a bare skip
        bare = await client.post(f"/v1/review-queue/{second}/skip", json={}, headers=bob)
        assert bare.status_code == 200, bare.text
        assert bare.json()["skipped"] == {
            "by": "Bob",
            "at": bare.json()["skipped"]["at"],
            "note": None,
        }
        assert {i["grading"]["id"] for i in await _queue(client, ada)} == {first, second}

        events = await _history(client, ada, first)
        assert [e["event"] for e in events] == ["review.claimed", "review.skipped"]
        assert events[-1]["actor_name"] == "Ada" and events[-1]["payload"]["note"] == note

        too_long = await client.post(
            f"/v1/review-queue/{first}/skip", json={"note": "x" * 2001}, headers=ada
        )
        assert too_long.status_code == 422
        assert [e["field"] for e in too_long.json()["errors"]] == ["note"]
        unknown = await client.post("/v1/review-queue/nope/skip", json={}, headers=ada)
        assert unknown.status_code == 404
        refused = await client.post(f"/v1/review-queue/{first}/skip", json={}, headers=agent)
        assert refused.status_code == 403


async def test_items_are_assigned_by_name_or_id_filtered_to_me_and_unassigned(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(**scripted_judge(QUEUED, QUEUED)) as client:
        first = (await graded(client, agent, DIAGNOSIS + " 1"))["id"]
        second = (await graded(client, agent, DIAGNOSIS + " 2"))["id"]
        bob_id = await _token_id(client, admin, "Bob")

        by_name = await client.post(
            f"/v1/review-queue/{first}/assign", json={"assignee": "Ada"}, headers=admin
        )
        assert by_name.status_code == 200, by_name.text
        assert by_name.json()["assigned_to"] == "Ada"
        by_id = await client.post(
            f"/v1/review-queue/{second}/assign", json={"assignee": bob_id}, headers=ada
        )
        assert by_id.status_code == 200 and by_id.json()["assigned_to"] == "Bob"

        everyone = await _queue(client, bob)
        assert _item(everyone, first)["assigned_to"] == "Ada"
        assert _item(everyone, second)["assigned_to"] == "Bob"
        assert bob_id not in str(everyone)  # names, never token ids
        mine = await _queue(client, ada, "?assigned=me")
        assert [i["grading"]["id"] for i in mine] == [first]
        assert [i["grading"]["id"] for i in await _queue(client, bob, "?assigned=me")] == [second]
        assert await _queue(client, admin, "?assigned=me") == []
        wrong = await client.get("/v1/review-queue?assigned=you", headers=ada)
        assert wrong.status_code == 422

        unassigned = await client.post(
            f"/v1/review-queue/{first}/assign", json={"assignee": None}, headers=ada
        )
        assert unassigned.status_code == 200 and unassigned.json()["assigned_to"] is None
        assert await _queue(client, ada, "?assigned=me") == []
        assert _item(await _queue(client, ada), first)["assigned_to"] is None

        events = await _history(client, ada, first)
        assert [(e["event"], e["actor_name"]) for e in events] == [
            ("review.assigned", "Root"),
            ("review.unassigned", "Ada"),
        ]
        assert events[0]["payload"]["assignee_name"] == "Ada"
        again = await client.post(
            f"/v1/review-queue/{second}/assign", json={"assignee": "Bob"}, headers=ada
        )
        assert again.status_code == 200  # already Bob's: nothing changes, nothing audited
        assert [e["event"] for e in await _history(client, ada, second)] == ["review.assigned"]


async def test_an_assignee_must_be_a_usable_adjudicator_or_admin(
    api_client: Any, tokens: Any
) -> None:
    agent, admin = await tokens("submitter", "agent"), await tokens("admin", "Root")
    ada = await tokens("adjudicator", "Ada")
    await tokens("adjudicator", "Twin")
    await tokens("adjudicator", "Twin")
    await tokens("adjudicator", "Gone")
    async with api_client(**scripted_judge(QUEUED)) as client:
        grading = (await graded(client, agent))["id"]
        gone = await _token_id(client, admin, "Gone")
        assert (await client.post(f"/v1/tokens/{gone}/revoke", headers=admin)).status_code == 200
        cases = {
            "nobody": "no adjudicator or admin is named 'nobody'",
            "agent": "'agent' is a submitter",
            "Twin": "2 tokens are named 'Twin': give the token id",
            gone: "is revoked or expired",
            "Gone": "no adjudicator or admin is named 'Gone'",
        }
        for assignee, said in cases.items():
            answer = await client.post(
                f"/v1/review-queue/{grading}/assign", json={"assignee": assignee}, headers=ada
            )
            assert answer.status_code == 422, (assignee, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert answer.json()["errors"][0]["field"] == "assignee", answer.text
            assert said in answer.json()["detail"], answer.text
        for body in ({}, {"assignee": ""}, {"assignee": 3}, {"assignee": "Ada", "x": 1}):
            answer = await client.post(f"/v1/review-queue/{grading}/assign", json=body, headers=ada)
            assert answer.status_code == 422, (body, answer.text)
            assert "assignee" in answer.text or "x" in answer.text
        refused = await client.post(
            f"/v1/review-queue/{grading}/assign", json={"assignee": "Ada"}, headers=agent
        )
        assert refused.status_code == 403
        missing = await client.post(
            "/v1/review-queue/nope/assign", json={"assignee": "Ada"}, headers=ada
        )
        assert missing.status_code == 404
        assert _item(await _queue(client, ada), grading)["assigned_to"] is None
        assert await _history(client, ada, grading) == []
