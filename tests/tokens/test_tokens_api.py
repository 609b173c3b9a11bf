"""Issuing tokens over HTTP: the secret once, a bad expiry refused with nothing stored."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest


@pytest.mark.parametrize(
    ("expires_at", "message"),
    [
        # a fixed past time: a parameter must be the same in every process that collects
        ("2020-01-01T00:00:00+00:00", "expires_at is in the past"),
        ("2030-01-01T00:00:00", "expires_at needs a time zone"),
        ("2030-01-01", "expires_at needs a time zone"),
        ("20300101", "expires_at needs a time zone"),
    ],
)
async def test_a_bad_expiry_is_refused_and_nothing_is_stored(
    api_client: Any, tokens: Any, expires_at: str, message: str
) -> None:
    admin = await tokens("admin")
    async with api_client() as client:
        before = (await client.get("/v1/tokens", headers=admin)).json()
        answer = await client.post(
            "/v1/tokens",
            json={"name": "late", "role": "submitter", "expires_at": expires_at},
            headers=admin,
        )
        after = (await client.get("/v1/tokens", headers=admin)).json()
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.json()["errors"] == [{"field": "expires_at", "message": message}]
    assert after == before


async def test_an_expiry_given_as_digits_is_refused_never_read_as_seconds_since_1970(
    api_client: Any, tokens: Any
) -> None:
    """``expires_at: "4102444800"`` is no ISO 8601 date-time: 422 naming ``expires_at``,
    never a token expiring at that many seconds after 1970."""
    admin = await tokens("admin")
    async with api_client() as client:
        answer = await client.post(
            "/v1/tokens",
            json={"name": "digits", "role": "submitter", "expires_at": "4102444800"},
            headers=admin,
        )
        listed = (await client.get("/v1/tokens", headers=admin)).json()
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"] == [
        {"field": "expires_at", "message": "Value error, must be an ISO 8601 date-time"}
    ]
    assert not any(token["name"] == "digits" for token in listed)  # nothing stored


async def test_a_new_token_is_shown_once_and_works(api_client: Any, tokens: Any) -> None:
    admin = await tokens("admin")
    expiry = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    async with api_client() as client:
        made = await client.post(
            "/v1/tokens",
            json={"name": "agent-7", "role": "submitter", "expires_at": expiry},
            headers=admin,
        )
        listed = (await client.get("/v1/tokens", headers=admin)).json()
        own = await client.get(
            "/v1/gradings", headers={"Authorization": f"Bearer {made.json()['token']}"}
        )
    assert made.status_code == 201 and made.json()["role"] == "submitter"
    assert all("token" not in row for row in listed)
    assert own.status_code == 200 and own.json()["items"] == []
