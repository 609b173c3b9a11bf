"""A review queue longer than one page: the API pages through every item with a cursor,
and the queue page counts the whole filtered queue though it lists only its window."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine

from api.adjudication import queue_pages
from storage import Store
from storage.tables import GradingRecord
from tests.support.gradings import add_many
from tests.web.conftest import sign_in

#: the engine matters here (the counts and the keyset are SQL): PostgreSQL too
pytestmark = pytest.mark.postgres


def _same_created_at(engine: Engine) -> None:
    """Every grading created at the same instant: the queue's order falls to the ids."""
    with engine.begin() as connection:
        first = connection.execute(select(func.min(GradingRecord.created_at))).scalar_one()
        connection.execute(update(GradingRecord).values(created_at=first))


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
    the queue's order (urgency, created_at, id), across urgency tiers and ties of
    created_at, filtered and blind alike, until it is null; the pages together are the
    queue in one answer."""
    await add_many(store, {"unscored": 4, "fail": 4}, agent="a")
    _same_created_at(engine)
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
    api_client: Any, tokens: Any, store: Store
) -> None:
    """An edited cursor, or one of another list (the gradings'), is refused; an empty
    one reads the first page."""
    await add_many(store, {"unscored": 3})
    ada = await tokens("adjudicator", "Ada")
    async with api_client(start_workers=False) as client:
        _, cursor = await _ids(client, ada, limit=1)
        listed = await client.get("/v1/gradings", params={"limit": 1}, headers=ada)
        foreign = listed.json()["next_cursor"]
        payload, tag = cursor.split(".")
        edited = payload[:-1] + ("A" if payload[-1] != "A" else "B") + "." + tag
        refused = [
            await client.get("/v1/review-queue", params={"cursor": c}, headers=ada)
            for c in (edited, foreign, "not-a-cursor")
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
    on past it to the queue's end, across urgency tiers and ties of created_at, each
    item once in the queue's order, saying how many are left behind each."""
    monkeypatch.setattr(queue_pages, "QUEUE_WINDOW", 3)
    await add_many(store, {"unscored": 4, "fail": 4}, agent="a")
    _same_created_at(engine)
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
