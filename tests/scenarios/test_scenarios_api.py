"""Reading registered scenarios, whose ids may hold slashes as SREGym's do."""

from __future__ import annotations

from typing import Any

import pytest

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"


@pytest.mark.parametrize("path", ["hotel/user-port", "hotel%2Fuser-port"])
async def test_a_scenario_id_with_a_slash_is_found(api_client: Any, tokens: Any, path: str) -> None:
    admin = await tokens("admin")
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/user-port", "ground_truth": TRUTH}, headers=admin
        )
        got = await client.get(f"/v1/scenarios/{path}", headers=admin)
        missing = await client.get("/v1/scenarios/hotel/other", headers=admin)
    assert made.status_code == 201
    assert got.status_code == 200, got.text
    assert got.json()["id"] == "hotel/user-port" and got.json()["ground_truth"] == TRUTH
    assert missing.status_code == 404
    assert missing.json()["detail"] == "no scenario with id 'hotel/other'"


@pytest.mark.parametrize(
    "scenario_id",
    ["hotel/", "hotel//user-port", "hotel/./user-port", "hotel/../user-port", "hotel/.hidden"],
)
async def test_an_id_a_url_path_would_change_is_refused(
    api_client: Any, tokens: Any, scenario_id: str
) -> None:
    """A URL path loses an empty, ``.`` or ``..`` segment and a ``/`` at the end: a
    scenario of such an id could never be read nor given a new version, so it is never
    registered (422 naming ``id``, nothing stored)."""
    admin = await tokens("admin")
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios", json={"id": scenario_id, "ground_truth": TRUTH}, headers=admin
        )
        listed = await client.get("/v1/scenarios", headers=admin)
    assert made.status_code == 422, made.text
    assert made.json()["errors"][0]["field"] == "id"
    assert listed.json()["items"] == []
