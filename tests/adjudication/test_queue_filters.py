"""The queue page's filters select from the whole queue, before its window."""

from __future__ import annotations

from typing import Any

import pytest

from api.adjudication import queue_pages
from tests.support.judge_server import sregym_reply
from tests.support.submissions import IDS, scripted_judge
from tests.web.conftest import sign_in

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
#: fails whose quotes are not in the diagnosis: queued, and not held
QUEUED = sregym_reply(set(IDS[:3]), evidence="not in the diagnosis at all")
#: the page's window, made small: more items than it are queued ahead of the target
WINDOW = 3


async def _submit(client: Any, headers: dict[str, str], diagnosis: str, model: str) -> str:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": diagnosis, "ground_truth": TRUTH, "agent": "a", "model": model},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("model=target", True),
        ("judge=scripted", True),  # a part of backend:model
        ("judge=scr%25pted", False),  # a wildcard is a character like any other
        ("provisional=true", True),  # a fail of an uncalibrated judge is provisional
        ("provisional=false", False),
    ],
)
async def test_a_filter_finds_an_item_queued_behind_a_full_window(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch, query: str, found: bool
) -> None:
    """With more items queued ahead of the target than the page's window holds, the
    filtered view still counts and shows it, and the walk (``n``) opens it."""
    monkeypatch.setattr(queue_pages, "QUEUE_WINDOW", WINDOW)
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(*[QUEUED] * (WINDOW + 2))) as c:
        for n in range(WINDOW + 1):
            await _submit(c, agent, f"{DIAGNOSIS} Bulk {n}.", "bulk")
        target = await _submit(c, agent, f"{DIAGNOSIS} Target.", "target")
        await sign_in(c, ada)
        filtered = f"{query}&model=target" if "model" not in query else query
        page = (await c.get(f"/queue?{filtered}")).text
        walk = await c.get(f"/queue/next?q.{filtered.replace('&', '&q.')}", follow_redirects=False)
    if not found:
        assert target not in page
        return
    assert 'data-testid="progress"><strong>1</strong> to review' in page
    assert target in page
    assert walk.headers["location"].startswith(f"/gradings/{target}?"), walk.headers


async def test_an_unknown_provisional_value_is_refused_not_read_as_false(
    api_client: Any, tokens: Any
) -> None:
    """``/queue?provisional=`` takes ``true``, ``false`` or nothing (the page's select): any
    other value is a 422 naming ``provisional``, as an unknown ``reason`` is, never read as
    "qualified judge", which would hide every provisional item of the queue."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(QUEUED)) as c:
        grading_id = await _submit(c, agent, DIAGNOSIS, "m")
        await sign_in(c, ada)
        assert grading_id in (await c.get("/queue?provisional=true")).text  # it is queued
        for value in ("yes", "1"):
            page = await c.get(f"/queue?provisional={value}")
            assert page.status_code == 422, (value, page.status_code)
            assert "provisional must be true or false" in page.text
        walk = await c.get("/queue/next?q.provisional=maybe")
        assert walk.status_code == 422 and "q.provisional" in walk.text


@pytest.mark.postgres
async def test_the_judge_filter_matches_the_judge_as_written_on_every_database(
    api_client: Any, tokens: Any
) -> None:
    """``/queue?judge=`` finds items whose judge holds the text as written: ``SCRIPTED``
    finds none of the ``scripted`` judge's, on SQLite as on PostgreSQL, as the gradings
    list's ``judge`` filter does."""
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(QUEUED)) as c:
        target = await _submit(c, agent, DIAGNOSIS, "m")
        await sign_in(c, ada)
        exact = (await c.get("/queue?judge=scripted")).text
        other_case = (await c.get("/queue?judge=SCRIPTED")).text
        walk = await c.get("/queue/next?q.judge=SCRIPTED", follow_redirects=False)
        listed = (await c.get("/gradings?judge=SCRIPTED:pass")).text
    assert target in exact
    assert target not in other_case
    assert target not in walk.headers.get("location", "")
    assert target not in listed
