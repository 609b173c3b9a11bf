"""A review queue longer than one page: the API pages through every item with a cursor,
and the queue page counts the whole filtered queue though it lists only its window. A
promote regrade that replaces an item's grading leaves the item in its place."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

from api.adjudication import queue_pages
from api.adjudication.review_queries import ReviewQueries
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import Store
from storage.canonical import iso_utc
from storage.cursors import CursorCodec
from storage.keys import ServiceKey
from storage.tables import GradingRecord
from tests.conftest import Clock
from tests.storage.helpers import graded_result, new_submission, sregym_rubric, submit
from tests.support.gradings import add_many
from tests.web.conftest import sign_in

#: the engine matters here (the counts and the keyset are SQL): PostgreSQL too
pytestmark = pytest.mark.postgres


def _same_time(engine: Engine) -> None:
    """Every grading created, and listed, at the same instant: the queue's order falls to
    the submissions' ids."""
    with engine.begin() as connection:
        first = connection.execute(select(func.min(GradingRecord.created_at))).scalar_one()
        connection.execute(update(GradingRecord).values(created_at=first, listed_at=first))


async def _ids(client: Any, headers: dict[str, str], **params: Any) -> tuple[list[str], Any]:
    answer = await client.get("/v1/review-queue", params=params, headers=headers)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    ids = [i["grading_id"] if body["blind"] else i["grading"]["id"] for i in body["items"]]
    return ids, body["next_cursor"]


async def _every_page(client: Any, headers: dict[str, str], **params: Any) -> list[list[str]]:
    pages, cursor = [], None
    while True:
        ids, cursor = await _ids(
            client, headers, **params, **({"cursor": cursor} if cursor else {})
        )
        pages.append(ids)
        if cursor is None:
            return pages


async def test_the_review_queue_pages_through_every_item_in_the_queues_order(
    api_client: Any, tokens: Any, store: Store, engine: Engine
) -> None:
    """``next_cursor`` passed back as ``cursor`` continues after the page's last item in
    the queue's order (urgency, then the submission's place: when it was listed, then its
    id), across urgency tiers and ties of time, filtered and blind alike, until it is
    null; the pages together are the queue in one answer."""
    await add_many(store, {"unscored": 4, "fail": 4}, agent="a")
    _same_time(engine)
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as client:
        whole, last = await _ids(client, ada, limit=500)
        pages = await _every_page(client, ada, limit=3)
        unscored = await _every_page(client, ada, limit=3, reason="unscored")
        blind = await _every_page(client, ada, limit=5, blind="true")
    assert len(whole) == 8 and last is None
    assert [len(p) for p in pages] == [3, 3, 2]
    assert [i for p in pages for i in p] == whole
    assert [i for p in unscored for i in p] == whole[:4]
    assert [i for p in blind for i in p] == whole


async def test_a_review_queue_cursor_not_issued_for_it_is_a_400_naming_cursor(
    api_client: Any, tokens: Any, store: Store, service_key: ServiceKey
) -> None:
    """An edited cursor, one of another list (the gradings'), or one issued when the
    queue was ordered by the grading's creation time (``[tier, created_at, id]``) is
    refused; an empty one reads the first page."""
    [first_id, *_] = await add_many(store, {"unscored": 3})
    ada = await tokens("adjudicator", "Ada")
    grading = await store.gradings.get(first_id)
    earlier = CursorCodec(service_key, "review-queue").encode(
        [2, iso_utc(grading.grading.created_at), first_id]
    )
    async with api_client(start_workers=False) as client:
        _, cursor = await _ids(client, ada, limit=1)
        listed = await client.get("/v1/gradings", params={"limit": 1}, headers=ada)
        foreign = listed.json()["next_cursor"]
        payload, tag = cursor.split(".")
        edited = payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + tag
        refused = [
            await client.get("/v1/review-queue", params={"cursor": c}, headers=ada)
            for c in (edited, foreign, "not-a-cursor", earlier)
        ]
        first, _ = await _ids(client, ada, cursor="")
    for answer in refused:
        assert answer.status_code == 400, answer.text
        assert [e["field"] for e in answer.json()["errors"]] == ["cursor"]
    assert len(first) == 3


def _shown(page: str) -> tuple[int, dict[str, int], int, bool]:
    """What a queue page says: how many to review, the count of each reason, how many
    rows it lists, and whether it says that only some are listed."""
    total = re.search(r'data-testid="progress"><strong>(\d+)</strong> to review', page)
    assert total is not None, page
    counts = {r: int(n) for r, n in re.findall(r"(\w+) <strong>(\d+)</strong></a>", page)}
    return int(total.group(1)), counts, page.count("data-grading="), 'data-testid="window"' in page


async def test_the_queue_page_counts_the_whole_filtered_queue_past_its_window(
    api_client: Any, tokens: Any, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page lists the first ``QUEUE_WINDOW`` items and says so when the queue holds
    more; how many it holds in all and per reason counts every item under the filters,
    without those another adjudicator holds."""
    monkeypatch.setattr(queue_pages, "QUEUE_WINDOW", 3)
    held = (await add_many(store, {"unscored": 4, "fail": 3}, agent="a"))[0]
    await add_many(store, {"fail": 2}, agent="b")
    ada, bob = await tokens("adjudicator", "Ada"), await tokens("adjudicator", "Bob")
    async with api_client(start_workers=False) as client:
        claim = await client.post(f"/v1/review-queue/{held}/claim", json={}, headers=bob)
        assert claim.status_code == 200, claim.text
        await sign_in(client, ada)
        whole = _shown((await client.get("/queue")).text)
        of_b = _shown((await client.get("/queue?agent=b")).text)
        decisive = _shown((await client.get("/queue?agent=a&reason=decisive")).text)
    total, counts, rows, cut = whole
    assert (total, counts["unscored"], counts["decisive"], rows, cut) == (8, 3, 5, 3, True)
    total, counts, rows, cut = of_b
    assert (total, counts["unscored"], counts["decisive"], rows, cut) == (2, 0, 2, 2, False)
    total, counts, rows, cut = decisive
    assert (total, counts["unscored"], counts["decisive"], rows, cut) == (3, 0, 3, 3, False)


async def test_a_walk_goes_through_the_whole_queue_past_the_pages_window(
    api_client: Any, tokens: Any, store: Store, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page lists only its window, but a walk (``n``, then Next from each item) goes
    on past it to the queue's end, across urgency tiers and ties of time, each
    item once in the queue's order, saying how many are left behind each."""
    monkeypatch.setattr(queue_pages, "QUEUE_WINDOW", 3)
    await add_many(store, {"unscored": 4, "fail": 4}, agent="a")
    _same_time(engine)
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as client:
        order, _ = await _ids(client, ada, limit=500)
        await sign_in(client, ada)
        visited, left = [], []
        location = "/queue/next"
        for _ in range(20):
            answer = await client.get(location, follow_redirects=False)
            location = answer.headers["location"]
            if location.startswith("/queue"):
                break
            visited.append(location.split("/gradings/", 1)[1].split("?", 1)[0])
            page = (await client.get(location)).text
            shown = re.search(r"item (\d+) of this pass · (\d+) more", page)
            assert shown is not None and int(shown[1]) == len(visited), page[:500]
            left.append(int(shown[2]))
            link = page.split('data-testid="next"', 1)[0].rsplit('href="', 1)[1].split('"', 1)[0]
            location = link.replace("&amp;", "&")
    assert location == "/queue?end=true"
    assert visited == order and len(order) == 8
    assert left == [7, 6, 5, 4, 3, 2, 1, 0]


def _decisive() -> Any:
    """A pass one answer decides (7 of 9): queued as ``decisive``."""
    ids = [q.id for q in sregym_rubric().questions]
    return graded_result(ids[:7])


async def _queued(store: Store, agent: str) -> str:
    """A decisive item of ``agent``'s submission; its submission's id."""
    outcome = await submit(store, new_submission(f"diagnosis of {agent}", agent=agent))
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert claim.grading_id == outcome.grading.id
    assert await store.queue.complete(claim.grading_id, "w", _decisive())
    return outcome.submission.id


async def _promote_one(store: Store, agent: str) -> str:
    """A promote regrade of ``agent``'s submission that is decisive again: the new
    grading replaces the item's grading in the queue. Its id."""
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(agent=agent), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", _decisive())
    return item.grading_id


async def test_paging_the_queue_lists_an_item_once_when_a_promote_replaces_its_grading(
    store: Store, clock: Clock
) -> None:
    """Three decisive items, oldest first. An adjudicator reads the first page (a, b); a
    promote regrade replaces a's grading (decisive again, still queued). The next page
    lists c alone: a was listed already, and its new grading keeps its place."""
    subs = []
    for agent in ("a", "b", "c"):
        subs.append(await _queued(store, agent))
        clock.advance(1)
    queries = ReviewQueries(store.db)
    first = await store.db.run_read(queries.read_page, principal_id="ada", limit=2)
    assert [i.submission.id for i in first.items] == subs[:2]
    assert first.next_cursor is not None

    clock.advance(60)
    replaced = await _promote_one(store, "a")

    second = await store.db.run_read(
        queries.read_page, principal_id="ada", after=first.next_cursor, limit=2
    )
    assert [i.submission.id for i in first.items + second.items] == subs
    assert second.next_cursor is None
    whole = await store.db.run_read(queries.read_page, principal_id="ada", limit=10)
    assert whole.items[0].grading.id == replaced


async def test_the_queue_keeps_an_item_oldest_first_and_its_age_when_a_promote_replaces_it(
    api_client: Any, tokens: Any, store: Store, clock: Clock
) -> None:
    """Oldest first within a tier: a's submission has waited longest, and a regrade that
    leaves it decisive does not make it newer than b's and c's, in the API's order or in
    the queue page's age column (a's age counts from its first grading)."""
    clock.advance(-(3 * 3600 + 60))  # queued three hours ago
    subs = []
    for agent in ("a", "b", "c"):
        subs.append(await _queued(store, agent))
        clock.advance(1)
    clock.advance(3 * 3600 + 60 - 3)  # regraded now
    replaced = await _promote_one(store, "a")
    queries = ReviewQueries(store.db)
    page = await store.db.run_read(queries.read_page, principal_id="ada", limit=10)
    assert [i.submission.id for i in page.items] == subs
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as client:
        ids, _ = await _ids(client, ada, limit=10)
        assert ids[0] == replaced
        await sign_in(client, ada)
        queue = (await client.get("/queue")).text
    row = queue.split(f'data-grading="{replaced}"', 1)[1].split("</tr>", 1)[0]
    assert ">3 h</td>" in row, row
