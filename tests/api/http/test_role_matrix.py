"""Every route x every role, plus no token, a revoked token and an expired one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from storage import Store, TokenRecord
from storage.canonical import utcnow

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999."
PRINCIPALS = ["none", "revoked", "expired", "submitter", "other-submitter", "adjudicator", "admin"]
OK = "2xx"

# (method, path, body, extra headers, expected by principal; missing = 401 for the
# tokenless kinds). {G} is a grading of "submitter", {S} a registered scenario.
ROUTES: list[tuple[str, str, Any, dict[str, str], dict[str, Any]]] = [
    (
        "POST",
        "/v1/submissions",
        {"diagnosis": DIAGNOSIS, "ground_truth": "their own truth"},
        {},
        {"submitter": OK, "other-submitter": OK, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/gradings/{G}",
        None,
        {},
        {"submitter": OK, "other-submitter": 404, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/gradings",
        None,
        {},
        {"submitter": OK, "other-submitter": OK, "adjudicator": OK, "admin": OK},
    ),
    (
        "POST",
        "/v1/gradings/{G}/overrides",
        {"verdict": "fail", "reason": "role matrix"},
        {"If-Match": '"0"'},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 412, "admin": 412},
    ),
    (
        "GET",
        "/v1/gradings/{G}/history",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/review-queue",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/stats/agreement",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "POST",
        "/v1/review-queue/{G}/claim",
        {},
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "POST",
        "/v1/review-queue/{G}/done",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/failure-tags",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "POST",
        "/v1/failure-tags",
        {"tag": "new-tag", "description": "a new tag"},
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 403, "admin": OK},
    ),
    (
        "POST",
        "/v1/gradings/{G}/tags",
        {"tag": "misread-unit"},
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "DELETE",
        "/v1/gradings/{G}/tags/999999",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 404, "admin": 404},
    ),
    (
        "POST",
        "/v1/scenarios",
        {"id": "s-new", "ground_truth": "x"},
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 403, "admin": OK},
    ),
    (
        "GET",
        "/v1/scenarios/{S}",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/rubrics",
        None,
        {},
        {"submitter": OK, "other-submitter": OK, "adjudicator": OK, "admin": OK},
    ),
    (
        "GET",
        "/v1/rubrics/sregym-rca",
        None,
        {},
        {"submitter": OK, "other-submitter": OK, "adjudicator": OK, "admin": OK},
    ),
    (
        "POST",
        "/v1/tokens",
        {"name": "x", "role": "submitter"},
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 403, "admin": OK},
    ),
    (
        "GET",
        "/v1/tokens",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 403, "admin": OK},
    ),
    (
        "POST",
        "/v1/tokens/nope/revoke",
        None,
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": 403, "admin": 404},
    ),
    (
        "POST",
        "/v1/gradings/{G}/labels",
        {"answers": {"D1-Q1": "yes"}},
        {},
        {"submitter": 403, "other-submitter": 403, "adjudicator": OK, "admin": OK},
    ),
]
PUBLIC = [("GET", "/healthz"), ("GET", "/schema/openapi.json")]


async def _principals(engine: AsyncEngine) -> dict[str, dict[str, str]]:
    store = Store(engine)
    headers: dict[str, dict[str, str]] = {"none": {}}
    for name in PRINCIPALS[1:]:
        role = "submitter" if "submitter" in name or name in ("revoked", "expired") else name
        plaintext, record = await store.tokens.create(name=name, role=role)
        headers[name] = {"Authorization": f"Bearer {plaintext}"}
        if name == "revoked":
            await store.tokens.revoke(record.id)
        if name == "expired":
            async with engine.begin() as connection:
                await connection.execute(
                    update(TokenRecord)
                    .where(TokenRecord.id == record.id)  # type: ignore[arg-type]
                    .values(expires_at=utcnow() - timedelta(minutes=1))
                )
    return headers


def _matches(status: int, expected: Any) -> bool:
    return 200 <= status < 300 if expected == OK else status == expected


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_every_route_answers_each_principal_as_expected(
    api_client: Any, engine: AsyncEngine, principal: str
) -> None:
    headers = await _principals(engine)
    admin = headers["admin"]
    async with api_client() as client:
        await client.post("/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=admin)
        created = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "scenario_id": "s1"},
            headers=headers["submitter"],
        )
        grading_id = created.json()["id"]
        failures = []
        for method, path, body, extra, expected_by in ROUTES:
            url = path.format(G=grading_id, S="s1")
            expected = expected_by.get(principal, 401)
            response = await client.request(
                method, url, json=body, headers={**headers[principal], **extra}
            )
            if not _matches(response.status_code, expected):
                failures.append(f"{method} {url}: {response.status_code}, expected {expected}")
            if response.status_code >= 400:
                assert response.headers["content-type"].startswith("application/problem+json")
            if principal not in ("adjudicator", "admin"):
                # the scenario's ground truth and judge prompts never reach submitters
                assert TRUTH not in response.text, f"{method} {url} leaks the ground truth"
        for method, url in PUBLIC:
            response = await client.request(method, url, headers=headers[principal])
            if response.status_code != 200:
                failures.append(f"{method} {url}: {response.status_code}")
    assert not failures, "\n".join(failures)
