"""A worker with a free slot takes a new grading in the submission's own transaction:
no claim round (no probe, no pick, no lease update) between intake and grading."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from tests.support.statements import statements
from tests.support.submissions import DIAGNOSIS, TRUTH, graded


def _claims(seen: list[str]) -> list[str]:
    """The claim statements among ``seen``: the lease update of ``claim_pending``."""
    return [s for s in seen if s.startswith("UPDATE grading SET lease_owner")]


async def test_a_free_worker_grades_a_submission_without_claiming_it(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent = await tokens("submitter")
    async with api_client(poll_seconds=30) as client:  # no claim round from polling
        await graded(client, agent)  # the workers' first round has run
        with statements(engine) as seen:
            grading = await graded(client, agent, DIAGNOSIS + " Seen in the logs.")
        assert grading["status"] == "graded"
        assert _claims(seen) == [], "the grading was claimed from the queue"


async def test_a_replayed_submission_gives_its_slot_back(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """With one worker, a replay's reserved slot is freed, or nothing is graded again."""
    headers = {**(await tokens("submitter")), "Idempotency-Key": "run-1"}
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client(workers=1) as client:
        first = await client.post("/v1/submissions?wait=10", json=body, headers=headers)
        assert first.json()["status"] == "graded"
        for _ in range(3):
            replay = await client.post("/v1/submissions", json=body, headers=headers)
            assert replay.headers.get("idempotent-replayed") == "true"
        other = {**headers, "Idempotency-Key": "run-2"}
        second = await client.post("/v1/submissions?wait=10", json=body, headers=other)
        assert second.json()["status"] == "graded"
