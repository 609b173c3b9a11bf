"""Regrading everything over HTTP in the tests, and waiting for the job to end."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.support.app_client import AppClient

__all__ = ["promote_regrade", "shadow_regrade"]


async def shadow_regrade(
    client: AppClient, admin: dict[str, str], judge: str, *, seconds: float = 5
) -> dict[str, Any]:
    """Regrade every current grading in shadow with ``judge``; the job once it is done."""
    return await _regrade(client, admin, judge, "shadow", seconds)


async def promote_regrade(
    client: AppClient, admin: dict[str, str], judge: str, *, seconds: float = 5
) -> dict[str, Any]:
    """Regrade every current grading with ``judge`` and promote the new gradings (they
    supersede the current ones); the job once it is done."""
    return await _regrade(client, admin, judge, "promote", seconds)


async def _regrade(
    client: AppClient, admin: dict[str, str], judge: str, mode: str, seconds: float
) -> dict[str, Any]:
    job = await client.post("/v1/regrade-jobs", json={"judge": judge, "mode": mode}, headers=admin)
    assert job.status_code == 201, job.text
    for _ in range(int(seconds / 0.05)):
        state = dict(
            (await client.get(f"/v1/regrade-jobs/{job.json()['id']}", headers=admin)).json()
        )
        if state["state"] == "done":
            return state
        await asyncio.sleep(0.05)
    raise AssertionError(f"the regrade job is still {state['state']}")
