"""An unscored grading is provisional while its judge has not qualified: also one the
service's own error made unscored (``internal_error``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.grading import workers
from tests.support.submissions import TRUTH

JUDGE = "scripted:pass"


async def test_an_internal_error_unscored_grading_of_an_uncalibrated_judge_is_provisional(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every grading of a judge no calibration run qualified is provisional, unscored
    ones too: also one the service's own error made unscored after its last try."""

    async def broken(*args: Any) -> Any:  # a fault in the service's own code while grading
        raise RuntimeError("a bug of the service")

    monkeypatch.setattr(workers, "confirmed", broken)
    async with api_client(judge=JUDGE, judge_retry_seconds=0.05) as client:
        agent, adj = await tokens("submitter"), await tokens("adjudicator")
        body = {"diagnosis": "user-service listens on 9999", "ground_truth": TRUTH}
        accepted = await client.post("/v1/submissions", json=body, headers=agent)
        assert accepted.status_code in (201, 202), accepted.text
        location = accepted.headers.get("location") or f"/v1/gradings/{accepted.json()['id']}"
        grading: dict[str, Any] = {}
        for _ in range(200):
            grading = (await client.get(location, headers=adj)).json()
            if grading["status"] != "pending":
                break
            await asyncio.sleep(0.05)
        assert (grading["status"], grading["unscored_reason"]) == ("unscored", "internal_error")
        assert grading["provisional"] is True
        excluded = await client.get(
            "/v1/stats/pass-rates",
            params={"provisional": "only", "inline": "include"},
            headers=adj,
        )
        assert excluded.json()["overall"]["unscored"] == 1, excluded.json()["overall"]
