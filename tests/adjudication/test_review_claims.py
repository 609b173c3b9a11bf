"""Who holds a queued item, and who may finish it: a claim made with a token since
revoked or expired holds nothing, one run out holds nothing from its last instant, and
only its holder (or anyone, once nobody holds it) marks an item done, never while the
grading is still being graded."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, graded, scripted_judge

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


async def _token_id(client: Any, admin: dict[str, str], name: str) -> str:
    listed = (await client.get("/v1/tokens", headers=admin)).json()
    return str(next(t["id"] for t in listed if t["name"] == name))


async def test_a_revoked_holders_claim_is_not_shown_as_holding_the_item(
    api_client: Any, tokens: Any
) -> None:
    """The item is back in others' queue, held by nobody (``claimed_by`` null, in the
    blind view and the answers of an assignment and a skip too), as after a claim that
    ran out."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    alice, bob = await tokens("adjudicator", "alice"), await tokens("adjudicator", "bob")
    async with api_client(**scripted_judge(QUEUED)) as client:
        gid = (await graded(client, agent, DIAGNOSIS))["id"]
        held = await client.post(
            f"/v1/review-queue/{gid}/claim", json={"minutes": 600}, headers=alice
        )
        assert held.status_code == 200, held.text
        alice_id = await _token_id(client, admin, "alice")
        assert (
            await client.post(f"/v1/tokens/{alice_id}/revoke", headers=admin)
        ).status_code == 200
        item = _item(await _queue(client, bob), gid)  # back in Bob's queue, as documented
        blind = (await client.get("/v1/review-queue?blind=true", headers=bob)).json()["items"]
        blind_item = next(i for i in blind if i["grading_id"] == gid)
        assigned = await client.post(
            f"/v1/review-queue/{gid}/assign", json={"assignee": "bob"}, headers=bob
        )
        skipped = await client.post(f"/v1/review-queue/{gid}/skip", json={}, headers=bob)
    assert item["claimed_by"] is None, item["claimed_by"]
    assert blind_item["claimed_by"] is None, blind_item["claimed_by"]
    assert assigned.status_code == 200 and skipped.status_code == 200
    assert assigned.json()["claimed_by"] is None, assigned.json()
    assert skipped.json()["claimed_by"] is None, skipped.json()


async def test_an_expired_holders_claim_is_not_shown_as_holding_the_item(
    api_client: Any, tokens: Any
) -> None:
    """Likewise for a claim made with a token that has expired since."""
    agent, admin = await tokens("submitter"), await tokens("admin", "Root")
    bob = await tokens("adjudicator", "bob")
    async with api_client(**scripted_judge(QUEUED)) as client:
        gid = (await graded(client, agent, DIAGNOSIS))["id"]
        db = client.app.state.services.store.db
        soon = (db.clock() + timedelta(minutes=5)).isoformat()
        made = await client.post(
            "/v1/tokens",
            json={"name": "carol", "role": "adjudicator", "expires_at": soon},
            headers=admin,
        )
        assert made.status_code == 201, made.text
        carol = {"Authorization": f"Bearer {made.json()['token']}"}
        held = await client.post(
            f"/v1/review-queue/{gid}/claim", json={"minutes": 600}, headers=carol
        )
        assert held.status_code == 200, held.text
        real = db.clock
        db.clock = lambda: real() + timedelta(minutes=10)  # carol's token has expired
        item = _item(await _queue(client, bob), gid)
    assert item["claimed_by"] is None, item["claimed_by"]


async def test_done_on_an_item_another_adjudicator_holds_is_a_409(
    api_client: Any, tokens: Any
) -> None:
    """Bob cannot mark done the review Alice holds (which would end her claim behind her
    back): 409, and the item stays hers, still queued."""
    agent = await tokens("submitter")
    alice, bob = await tokens("adjudicator", "alice"), await tokens("adjudicator", "bob")
    async with api_client(**scripted_judge(QUEUED)) as client:
        gid = (await graded(client, agent, DIAGNOSIS))["id"]
        held = await client.post(f"/v1/review-queue/{gid}/claim", json={}, headers=alice)
        assert held.status_code == 200, held.text
        done = await client.post(f"/v1/review-queue/{gid}/done", headers=bob)
        still = [i["grading"]["id"] for i in await _queue(client, alice)]
    assert done.status_code == 409, done.text
    assert gid in still


async def test_an_item_whose_claim_runs_out_now_is_back_in_the_queue_it_can_be_claimed_from(
    api_client: Any, tokens: Any
) -> None:
    """At the instant a claim runs out nobody holds the item: another adjudicator may
    claim it, and the queue shows it to them."""
    agent = await tokens("submitter")
    alice, bob = await tokens("adjudicator", "alice"), await tokens("adjudicator", "bob")
    async with api_client(**scripted_judge(QUEUED)) as client:
        gid = (await graded(client, agent, DIAGNOSIS))["id"]
        db = client.app.state.services.store.db
        start = db.clock()
        db.clock = lambda: start
        held = await client.post(
            f"/v1/review-queue/{gid}/claim", json={"minutes": 5}, headers=alice
        )
        assert held.status_code == 200, held.text
        db.clock = lambda: start + timedelta(minutes=5)  # the claim's last instant
        seen_by_bob = [i["grading"]["id"] for i in await _queue(client, bob)]
        taken = await client.post(f"/v1/review-queue/{gid}/claim", json={}, headers=bob)
    assert taken.status_code == 200, taken.text  # nobody holds it: Bob may take it
    assert gid in seen_by_bob, "the item is claimable but hidden from the queue"


async def test_done_on_a_pending_grading_does_not_hide_its_unscored_outcome_from_the_queue(
    api_client: Any, tokens: Any
) -> None:
    """A pending grading has no result to review yet: ``done`` is refused (409, as its
    labels are) and its review stays open, so the unscored grading the judge's failure
    then makes is queued."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    judge = scripted_judge(*["nonsense"] * 4)
    async with api_client(start_workers=False, **judge) as client:
        sent = await client.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=agent
        )
        assert sent.status_code == 202, sent.text
        gid = sent.json()["id"]
        done = await client.post(f"/v1/review-queue/{gid}/done", headers=ada)
    async with api_client(**judge) as client:  # the workers come up and grade it
        for _ in range(200):
            grading = (await client.get(f"/v1/gradings/{gid}", headers=ada)).json()
            if grading["status"] != "pending":
                break
            await asyncio.sleep(0.05)
        assert grading["status"] == "unscored", grading["status"]
        items = (await client.get("/v1/review-queue", headers=ada)).json()["items"]
    queued = gid in [i["grading"]["id"] for i in items]
    assert queued, f"done on the pending grading answered {done.status_code}; item lost"
    assert done.status_code == 409, done.text
