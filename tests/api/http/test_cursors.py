"""Pagination cursors over HTTP: opaque, honoured by every server sharing the service key,
a 400 naming ``cursor`` when forged, edited or signed by another deployment, and an
empty one the first page of every list."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from storage.cursors import CursorCodec
from storage.keys import ServiceKey
from tests.support.submissions import TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: the service key of another deployment
OTHER_KEY = ServiceKey(b"o" * 40)


async def _submit_three(client: Any, headers: dict[str, str]) -> None:
    for n in range(3):
        body = {"diagnosis": f"diagnosis {n}", "ground_truth": TRUTH}
        answer = await client.post("/v1/submissions", json=body, headers=headers)
        assert answer.status_code in (201, 202), answer.text


async def _first_page(client: Any, headers: dict[str, str]) -> tuple[list[str], str]:
    answer = await client.get("/v1/gradings?limit=1", headers=headers)
    assert answer.status_code == 200, answer.text
    page = answer.json()
    return [g["id"] for g in page["items"]], page["next_cursor"]


def _assert_cursor_refused(answer: Any) -> None:
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    body = answer.json()
    assert body["title"] == "Invalid cursor"
    assert [e["field"] for e in body["errors"]] == ["cursor"]


async def test_a_cursor_from_one_server_pages_on_another_with_the_same_key(
    api_client: Any, tokens: Any
) -> None:
    agent = await tokens("submitter")
    async with api_client(start_workers=False) as first:
        await _submit_three(first, agent)
        seen, cursor = await _first_page(first, agent)
    assert cursor and all(c.isalnum() or c in "-_." for c in cursor)
    async with api_client(start_workers=False) as second:  # another server, the same key
        answer = await second.get(f"/v1/gradings?limit=5&cursor={cursor}", headers=agent)
    assert answer.status_code == 200, answer.text
    rest = [g["id"] for g in answer.json()["items"]]
    assert len(rest) == 2 and not set(rest) & set(seen)


async def test_a_cursor_from_another_deployment_is_a_400(api_client: Any, tokens: Any) -> None:
    """The same position signed with another deployment's key is refused."""
    agent = await tokens("submitter")
    async with api_client(start_workers=False) as client:
        await _submit_three(client, agent)
        _, cursor = await _first_page(client, agent)
        payload = base64.urlsafe_b64decode(cursor.split(".")[0] + "==")
        foreign = CursorCodec(OTHER_KEY, "gradings").encode(json.loads(payload))
        answer = await client.get(f"/v1/gradings?cursor={foreign}", headers=agent)
    _assert_cursor_refused(answer)


async def test_an_edited_cursor_is_a_400_naming_the_parameter(api_client: Any, tokens: Any) -> None:
    agent = await tokens("submitter")
    async with api_client(start_workers=False) as client:
        await _submit_three(client, agent)
        _, cursor = await _first_page(client, agent)
        payload, tag = cursor.split(".")
        swapped = payload[:-1] + ("A" if payload[-1] != "A" else "B")
        for edited in (f"{swapped}.{tag}", payload, f"{cursor}x", "not-a-cursor"):
            answer = await client.get(f"/v1/gradings?cursor={edited}", headers=agent)
            _assert_cursor_refused(answer)


async def test_an_empty_cursor_is_the_first_page_of_every_list(
    api_client: Any, tokens: Any
) -> None:
    """``?cursor=`` (a form or script that always sends the parameter) answers each
    paged list's first page, as no cursor does."""
    admin = await tokens("admin")
    async with api_client(start_workers=False, webhook_allow_hosts="127.0.0.1") as client:
        await _submit_three(client, admin)
        made = await client.post(
            "/v1/webhooks",
            json={"url": "http://127.0.0.1:9/hook", "events": ["grading.completed"]},
            headers=admin,
        )
        assert made.status_code == 201, made.text
        lists = (
            "/v1/gradings",
            "/v1/scenarios",
            "/v1/review-queue",
            "/v1/stats/attempts",
            f"/v1/webhooks/{made.json()['id']}/deliveries",
        )
        for path in lists:
            first = await client.get(f"{path}?limit=1", headers=admin)
            empty = await client.get(f"{path}?limit=1&cursor=", headers=admin)
            assert first.status_code == 200, (path, first.text)
            assert empty.status_code == 200, (path, empty.text)
            assert empty.json()["items"] == first.json()["items"], path
