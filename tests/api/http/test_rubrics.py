"""``GET /v1/rubrics/{id}``: a rubric by ``id`` (its current version) or ``id@version``."""

from __future__ import annotations

from typing import Any


async def test_a_rubric_is_read_by_id_or_id_at_version_and_an_empty_version_is_not_found(
    api_client: Any, tokens: Any
) -> None:
    """``id@`` names no version (a script that built it from a version it did not find):
    it is not found, never read as the current version the bare ``id`` names."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        current = await client.get("/v1/rubrics/sregym-rca", headers=admin)
        assert current.status_code == 200, current.text
        version = current.json()["version"]
        pinned = await client.get(f"/v1/rubrics/sregym-rca@{version}", headers=admin)
        empty = await client.get("/v1/rubrics/sregym-rca@", headers=admin)
    assert pinned.status_code == 200 and pinned.json()["version"] == version
    assert empty.status_code == 404, empty.text[:200]
