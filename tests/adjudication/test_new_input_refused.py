"""Bad input to the trace of a submission, a skip note and an assignment: a clear 4xx
naming what is wrong, and nothing stored or audited (both databases)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from storage.audit.chain import AuditRecord
from storage.tables import SubmissionRecord
from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, graded, scripted_judge

pytestmark = pytest.mark.postgres

QUEUED = sregym_reply(set(IDS[:3]), evidence="not in the diagnosis at all")


def _counts(engine: Engine) -> tuple[int, int]:
    with engine.connect() as connection:
        submissions = connection.execute(
            select(func.count()).select_from(SubmissionRecord)
        ).scalar()
        events = connection.execute(select(func.count()).select_from(AuditRecord)).scalar()
    return int(submissions or 0), int(events or 0)


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "trace",
    [
        [{"output": "pods\x00crashing"}],
        "free text with a NUL \x00 in it",
        [_deep(200)],
        42,
        [["not", "a", "step"]],
    ],
    ids=["nul-in-step", "nul-in-text", "deep", "number", "list-step"],
)
async def test_a_bad_trace_is_refused_and_nothing_is_stored(
    api_client: Any, tokens: Any, engine: Engine, trace: Any
) -> None:
    agent = await tokens("submitter")
    async with api_client() as client:
        before = _counts(engine)
        answer = await client.post(
            "/v1/submissions",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "trace": trace},
            headers=agent,
        )
        assert answer.status_code in (400, 422), answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert _counts(engine) == before


async def test_a_long_integer_in_a_trace_step_is_kept_exactly(api_client: Any, tokens: Any) -> None:
    """A trace is what a tool printed: any JSON number is a value, kept as given (like a
    submission's metadata), on both databases."""
    agent = await tokens("submitter")
    huge = 10**400
    async with api_client() as client:
        answer = await client.post(
            "/v1/submissions",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "trace": [{"exit": huge}]},
            headers=agent,
        )
        assert answer.status_code == 202, answer.text
        read = await client.get(f"/v1/gradings/{answer.json()['id']}", headers=agent)
    assert read.json()["submission"]["trace"] == [{"exit": huge}]


async def test_bad_skip_notes_and_assignees_are_refused_and_change_nothing(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    agent, ada = await tokens("submitter"), await tokens("adjudicator", "Ada")
    async with api_client(**scripted_judge(QUEUED)) as client:
        grading = (await graded(client, agent, DIAGNOSIS))["id"]
        before = _counts(engine)
        for path, body in (
            ("skip", {"note": "a\x00b"}),
            ("skip", {"note": "n" * 2001}),
            ("skip", {"note": _deep(200)}),
            ("assign", {"assignee": "Ada\x00"}),
            ("assign", {"assignee": 10**400}),
            ("assign", {"assignee": "nobody by that name"}),
            ("assign", {}),
        ):
            answer = await client.post(f"/v1/review-queue/{grading}/{path}", json=body, headers=ada)
            assert answer.status_code in (400, 422), (path, body, answer.text)
            assert answer.headers["content-type"].startswith("application/problem+json")
        assert _counts(engine) == before
        queue = (await client.get("/v1/review-queue", headers=ada)).json()["items"]
        item = next(i for i in queue if i["grading"]["id"] == grading)
        assert item["skipped"] is None and item["assigned_to"] is None
