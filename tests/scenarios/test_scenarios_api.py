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


async def test_a_stale_if_match_does_not_undo_another_admins_change(
    api_client: Any, tokens: Any
) -> None:
    """The ETag is the scenario's revision, which every change moves (a new title, tag
    list or set too, not only a new ground truth): a PUT made from a read before another
    admin's change gets 412 and undoes nothing."""
    admin = await tokens("admin")
    async with api_client() as client:
        made = await client.post(
            "/v1/scenarios",
            json={"id": "s", "ground_truth": TRUTH, "title": "A", "set": "public"},
            headers=admin,
        )
        etag = made.headers["ETag"]
        moved = await client.put(
            "/v1/scenarios/s",
            json={"ground_truth": TRUTH, "set": "held-out"},
            headers={**admin, "If-Match": etag},
        )
        stale = await client.put(
            "/v1/scenarios/s",
            json={"ground_truth": TRUTH + "!", "set": "public"},
            headers={**admin, "If-Match": etag},
        )
        read = await client.get("/v1/scenarios/s", headers=admin)
        fixed = await client.put(
            "/v1/scenarios/s",
            json={"ground_truth": TRUTH + "!"},
            headers={**admin, "If-Match": read.headers["ETag"]},
        )
    assert etag == '"1"' and made.json()["revision"] == 1
    assert moved.status_code == 200 and moved.json()["outcome"] == "updated"
    assert (moved.json()["version"], moved.json()["revision"]) == (1, 2)
    assert moved.headers["ETag"] == '"2"'
    assert stale.status_code == 412, stale.text
    assert read.json()["set"] == "held-out" and read.json()["ground_truth"] == TRUTH
    assert (read.json()["version"], read.json()["revision"]) == (1, 2)
    assert fixed.status_code == 200 and fixed.json()["outcome"] == "new_version"
    assert (fixed.json()["version"], fixed.json()["revision"]) == (2, 3)
    assert fixed.headers["ETag"] == '"3"'


async def test_a_taken_scenario_id_is_a_409_naming_id(api_client: Any, tokens: Any) -> None:
    """Registering an id already taken answers 409 naming ``id``, the field to change,
    and both ground truths' hashes; the stored scenario is left as it was."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        body = {"id": "hotel/user-port", "ground_truth": TRUTH}
        assert (await client.post("/v1/scenarios", json=body, headers=admin)).status_code == 201
        again = await client.post(
            "/v1/scenarios", json={**body, "ground_truth": TRUTH + " (edited)"}, headers=admin
        )
        stored = (await client.get("/v1/scenarios/hotel/user-port", headers=admin)).json()
    assert again.status_code == 409, again.text
    assert [e["field"] for e in again.json()["errors"]] == ["id"], again.text
    assert "another ground truth" in again.json()["detail"]
    assert (stored["ground_truth"], stored["version"]) == (TRUTH, 1)
