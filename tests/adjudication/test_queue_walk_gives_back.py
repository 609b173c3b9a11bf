"""Next (n) in a walk through the review queue gives back the item walked past, wherever
it is queued now: also when a promoted regrade moved it to another tier or verdict or out
of the walk's filter while it was open, when it was reassigned away from an "assigned to
me" walk, and when the walk's place in the queue (``q.key``) cannot be read. Others'
queues list it again at once, and the walk goes on to the item it would have opened."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import Store
from tests.storage.helpers import graded_result, new_submission, sregym_rubric, submit
from tests.web.conftest import sign_in

pytestmark = pytest.mark.postgres


def _decisive() -> Any:
    """A decisive pass by ``judge-model``: queued (every item needs a human here)."""
    ids = [q.id for q in sregym_rubric().questions]
    return graded_result(ids[:7])


async def _queued(store: Store, agent: str) -> str:
    """A submission of ``agent`` graded (a decisive pass) and queued; its grading's id."""
    outcome = await submit(store, new_submission(f"diagnosis of {agent}", agent=agent))
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "w", _decisive())
    return outcome.grading.id


async def _three_queued(store: Store, clock: Any) -> list[str]:
    """Agents a, b and c graded in that order (a queued first); their gradings' ids."""
    made = []
    for agent in ("a", "b", "c"):
        made.append(await _queued(store, agent))
        clock.advance(1)
    return made


async def _promote(store: Store, agent: str, result: Any) -> str:
    """A promote regrade of ``agent``'s submission graded ``result``; the new grading."""
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(agent=agent), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", result)
    return item.grading_id


def _opened(location: str) -> str:
    """The grading a ``/gradings/{id}?...`` location opens."""
    return location.split("/gradings/", 1)[1].split("?", 1)[0]


def _next_link(page: str) -> str:
    """The grading page's Next (n) link."""
    found = re.search(r'href="(/queue/next\?[^"]+)"[^>]*data-testid="next"', page)
    assert found, "the page has no Next link"
    return html.unescape(found[1])


async def _listed(client: Any, headers: dict[str, str]) -> list[str]:
    """The gradings the review queue lists to the holder of ``headers``."""
    items = (await client.get("/v1/review-queue", headers=headers)).json()["items"]
    return [i["grading"]["id"] for i in items]


@pytest.mark.parametrize("new", ["low_confidence", "fail"])
async def test_next_gives_back_an_item_a_promote_moved_to_another_tier_while_open(
    api_client: Any, tokens: Any, store: Store, clock: Any, new: str
) -> None:
    """Ada opens a (decisive pass); while she reads it a promote regrade replaces its
    grading with one placed elsewhere in the order (low confidence: a more urgent tier;
    a decisive fail: failures before passes), ahead of the walk. Her claim followed the
    item. Next walks on to b and gives a back: Bob's queue lists it again."""
    made = await _three_queued(store, clock)
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(start_workers=False) as c:
        await sign_in(c, ada)
        location = (await c.get("/queue/next", follow_redirects=False)).headers["location"]
        assert _opened(location) == made[0]
        nxt = _next_link((await c.get(location)).text)  # opened: claimed by Ada
        if new == "low_confidence":  # the same pass, one answer now given unsure: tier 2
            base = _decisive()
            answers = (base.answers[0].model_copy(update={"confidence": 0.2}), *base.answers[1:])
            result = base.model_copy(update={"answers": answers})
        else:  # a decisive fail: the same tier, failures before passes
            result = graded_result([q.id for q in sregym_rubric().questions][:6])
        replaced = await _promote(store, "a", result)
        assert replaced not in await _listed(c, bob)  # Ada holds it
        assert await _listed(c, ada) == [replaced, *made[1:]]  # queued, ahead of the walk

        onward = await c.get(nxt, follow_redirects=False)  # walked past
        assert onward.status_code == 303
        assert _opened(onward.headers["location"]) == made[1]
        assert replaced in await _listed(c, bob), "Ada still holds the item she walked past"
        history = (await c.get(f"/v1/gradings/{replaced}/history", headers=ada)).json()
        assert "review.released" in [e.get("kind") or e.get("event") for e in history["events"]]


async def test_next_gives_back_an_item_a_promote_took_out_of_the_walks_filter(
    api_client: Any, tokens: Any, store: Store, clock: Any
) -> None:
    """Ada walks the queue filtered by judge (``q.judge=judge-model``) and opens a; while
    she reads it a promote regrade by another judge replaces its grading (the same tier
    and verdict: decisive pass; her claim follows the item). The item is still queued for
    everyone, outside her filter. Next walks on to b and gives a back: Bob's unfiltered
    queue lists it again."""
    made = await _three_queued(store, clock)
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(start_workers=False) as c:
        await sign_in(c, ada)
        start = await c.get("/queue/next?q.judge=judge-model", follow_redirects=False)
        location = start.headers["location"]
        assert _opened(location) == made[0]
        nxt = _next_link((await c.get(location)).text)  # opened: claimed by Ada
        assert "q.judge=judge-model" in nxt
        new = _decisive().model_copy(update={"judge_model": "other-model"})
        replaced = await _promote(store, "a", new)
        got = (await c.get(f"/v1/gradings/{replaced}", headers=ada)).json()
        assert got["is_current"] and got["judge"]["model"] != "judge-model", got["judge"]
        assert await _listed(c, ada) == [replaced, *made[1:]]  # in the same place

        onward = await c.get(nxt, follow_redirects=False)  # walked past
        assert onward.status_code == 303
        assert _opened(onward.headers["location"]) == made[1]
        assert replaced in await _listed(c, bob), "Ada still holds the item she walked past"


async def test_next_gives_back_an_item_reassigned_away_from_an_assigned_to_me_walk(
    api_client: Any, tokens: Any, store: Store, clock: Any
) -> None:
    """Ada walks the items assigned to her and opens a; while she reads it an admin
    assigns it to Bob instead (her claim stays on it). Next walks on to b and gives a
    back: Bob's queue lists it again."""
    made = await _three_queued(store, clock)
    root = await tokens("admin", "Root")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(start_workers=False) as c:
        for grading_id in made[:2]:
            given = await c.post(
                f"/v1/review-queue/{grading_id}/assign", json={"assignee": "Ada"}, headers=root
            )
            assert given.status_code == 200, given.text
        await sign_in(c, ada)
        start = await c.get("/queue/next?q.assigned=me", follow_redirects=False)
        location = start.headers["location"]
        assert _opened(location) == made[0]
        nxt = _next_link((await c.get(location)).text)  # opened: claimed by Ada
        assert "q.assigned=me" in nxt
        moved = await c.post(
            f"/v1/review-queue/{made[0]}/assign", json={"assignee": "Bob"}, headers=root
        )
        assert moved.status_code == 200, moved.text
        assert made[0] not in await _listed(c, bob)  # Ada holds it

        onward = await c.get(nxt, follow_redirects=False)  # walked past
        assert onward.status_code == 303
        assert _opened(onward.headers["location"]) == made[1]
        assert made[0] in await _listed(c, bob), "Ada still holds the item she walked past"


async def test_next_gives_back_the_item_walked_past_when_the_walks_place_is_unreadable(
    api_client: Any, tokens: Any, store: Store, clock: Any
) -> None:
    """Ada opens b from the queue page, then follows a Next link whose place in the queue
    (``q.key``) was edited: the walk starts again from the queue's start (a), and b, the
    item walked past, is given back: Bob's queue lists it again."""
    made = await _three_queued(store, clock)
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(start_workers=False) as c:
        await sign_in(c, ada)
        queue = (await c.get("/queue")).text
        found = re.search(rf'href="(/gradings/{made[1]}\?[^"]*claim=true[^"]*)"', queue)
        assert found, "the queue page does not link b into a walk"
        location = html.unescape(found[1])
        nxt = _next_link((await c.get(location)).text)  # opened: claimed by Ada
        assert made[1] not in await _listed(c, bob)  # Ada holds it
        edited = re.sub(r"q\.key=[^&]+", "q.key=edited", nxt)
        assert edited != nxt

        onward = await c.get(edited, follow_redirects=False)  # walked past
        assert onward.status_code == 303
        assert _opened(onward.headers["location"]) == made[0]
        assert made[1] in await _listed(c, bob), "Ada still holds the item she walked past"
