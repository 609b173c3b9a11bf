"""What the HTTP tests submit, and how they wait for its grading.

One ground truth and one diagnosis that names its fault, the nine question ids of
SREGym's rubric, ``api_client`` settings for a scripted judge, and helpers that post
a submission and poll a grading.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from judge.backends.scripted import ScriptedBackend
from storage import SubmissionRecord
from tests.support.app_client import AppClient

__all__ = [
    "DIAGNOSIS",
    "IDS",
    "TRUTH",
    "count_submissions",
    "first_set",
    "graded",
    "scripted_judge",
]

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
#: SREGym's question ids, D1-Q1 to D3-Q3, in the rubric's order
IDS = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]


def scripted_judge(*replies: str) -> dict[str, Any]:
    """``api_client`` settings for an OpenAI-style judge that answers ``replies`` in turn."""
    spec = "openai:scripted@http://127.0.0.1:9/v1"
    return {"judge": spec, "backends": {spec: ScriptedBackend(list(replies), model="scripted")}}


async def graded(
    client: AppClient, headers: dict[str, str], diagnosis: str = DIAGNOSIS
) -> dict[str, Any]:
    """Submit ``diagnosis`` against ``TRUTH`` and wait for its grading (201)."""
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": diagnosis, "ground_truth": TRUTH},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return dict(response.json())


async def first_set(client: AppClient, location: str, headers: dict[str, str], field: str) -> Any:
    """The grading once ``field`` is set (polling for up to five seconds)."""
    for _ in range(100):
        grading = (await client.get(location, headers=headers)).json()
        if grading[field] is not None:
            return grading
        await asyncio.sleep(0.05)
    raise AssertionError(f"{field} never set: {grading}")


async def count_submissions(engine: Engine) -> int:
    """How many submissions are stored (to prove a refused request stored nothing)."""
    with engine.connect() as connection:
        query = select(func.count()).select_from(SubmissionRecord)
        return int((connection.execute(query)).scalar_one())
