"""An error of the service's own while grading is tried three times in all, then the
grading is unscored with reason ``internal_error``: a fault that repeats never asks the
judge for ever, and the calls it made are kept."""

from __future__ import annotations

from typing import Any

import pytest

from api.grading import workers
from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, first_set, scripted_judge

FAST_RETRY = {"judge_retry_seconds": 0.05, "poll_seconds": 0.05}


def failing_confirmation(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Make the step after the judge's reply raise ``times`` times; returns the count of
    calls made to it."""
    made: list[int] = []
    real = workers.confirmed

    async def confirm(*args: Any) -> Any:
        made.append(1)
        if len(made) <= times:
            raise RuntimeError("a bug that quotes the hidden truth: USER_PORT=9999")
        return await real(*args)

    monkeypatch.setattr(workers, "confirmed", confirm)
    return made


async def submitted(client: Any, headers: dict[str, str]) -> str:
    response = await client.post(
        "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=headers
    )
    assert response.status_code == 202, response.text
    return str(response.headers["location"])


async def test_a_fault_that_repeats_ends_unscored_with_every_call_kept(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    made = failing_confirmation(monkeypatch, times=10)
    judge = scripted_judge(*[sregym_reply(set(IDS), evidence="USER_PORT=9999")] * 5)
    async with api_client(**judge, **FAST_RETRY) as client:
        location = await submitted(client, agent)
        grading = await first_set(client, location, agent, "unscored_reason")
        history = (await client.get(f"{location}/history", headers=adjudicator)).json()
    [backend] = judge["backends"].values()
    assert (grading["status"], grading["unscored_reason"]) == ("unscored", "internal_error")
    assert "RuntimeError" in grading["detail"] and "USER_PORT" not in grading["detail"]
    assert len(made) == len(backend.requests) == workers.INTERNAL_ERROR_TRIES
    events = [e["event"] for e in history["events"]]
    deferred = [e["payload"] for e in history["events"] if e["event"] == "grading.deferred"]
    assert [p["reason"] for p in deferred] == [
        "internal_error: service error (try 1 of 3)",
        "internal_error: service error (try 2 of 3)",
    ]
    assert all(len(p["judge_calls"]) == 1 for p in deferred)  # each try's call is kept
    assert events.count("judge.call") == 3 and events[-1] == "grading.unscored"


async def test_a_fault_that_passes_grades_on_the_next_try(
    api_client: Any, tokens: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = await tokens("submitter")
    failing_confirmation(monkeypatch, times=1)
    judge = scripted_judge(*[sregym_reply(set(IDS), evidence="USER_PORT=9999")] * 2)
    async with api_client(**judge, **FAST_RETRY) as client:
        location = await submitted(client, agent)
        grading = await first_set(client, location, agent, "passed")
    assert grading["status"] == "graded" and grading["passed"] is True
