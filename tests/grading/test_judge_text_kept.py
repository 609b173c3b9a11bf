"""What a judge server sends back is kept on every database.

A judge's reply, its error messages and what it reports about itself are untrusted (a
hostile endpoint, or a model led by text injected in the diagnosis). PostgreSQL refuses
a NUL in text, a name longer than its column and a count beyond an INTEGER, where SQLite
stores anything: a NUL is left out, a name is clipped to 256 characters and an
impossible count is left out, so a grading ends the same on both."""

from __future__ import annotations

import json
from typing import Any

import pytest

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import Completion, JudgeRequest
from judge.errors import JudgeRejected
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

SPEC = "openai:scripted@http://127.0.0.1:9/v1"


class ReportingJudge(ScriptedBackend):
    """Answers well, and reports its reply with the fields given."""

    def __init__(self, **reported: Any) -> None:
        super().__init__(model="scripted")
        self._reported = reported

    async def complete(self, request: JudgeRequest) -> Completion:
        fields = {"model": "scripted", "prompt_tokens": 100, "completion_tokens": 50}
        return Completion(
            text=scripted_reply(request), response_format="json_schema",
            **{**fields, **self._reported},
        )  # fmt: skip


def _nul_in_reasoning(request: JudgeRequest) -> str:
    reply = json.loads(scripted_reply(request))
    for entry in reply.values():
        entry["reasoning"] = "scripted\u0000judge"
    return json.dumps(reply)


async def _graded(api_client: Any, tokens: Any, backend: ScriptedBackend) -> dict[str, Any]:
    agent = await tokens("submitter")
    async with api_client(judge=SPEC, backends={SPEC: backend}) as client:
        answer = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=agent,
        )
    assert answer.status_code == 201, answer.text[:500]
    return dict(answer.json())


@pytest.mark.parametrize(
    "reply",
    [lambda request: scripted_reply(request) + "\u0000", _nul_in_reasoning],
    ids=["after-the-reply", "in-its-reasoning"],
)
async def test_a_judge_reply_holding_a_nul_is_graded(
    api_client: Any, tokens: Any, reply: Any
) -> None:
    grading = await _graded(api_client, tokens, ScriptedBackend([reply] * 4, model="scripted"))
    assert grading["status"] == "graded", grading
    assert all("\u0000" not in a["reasoning"] for a in grading["answers"])


async def test_a_judge_error_holding_a_nul_makes_an_unscored_grading(
    api_client: Any, tokens: Any
) -> None:
    backend = ScriptedBackend([JudgeRejected("bad request: \u0000 in prompt")] * 4)
    grading = await _graded(api_client, tokens, backend)
    assert grading["status"] == "unscored", grading


@pytest.mark.parametrize(
    "reported",
    [
        {"model": "/models/" + "m" * 300 + ".gguf"},  # llama.cpp reports the file it loaded
        {"fingerprint": "fp_" + "f" * 300},
        {"prompt_tokens": 2**31},
    ],
    ids=["long-model", "long-fingerprint", "huge-usage"],
)
async def test_what_a_judge_reports_about_its_reply_never_keeps_a_grading_pending(
    api_client: Any, tokens: Any, reported: dict[str, Any]
) -> None:
    grading = await _graded(api_client, tokens, ReportingJudge(**reported))
    assert grading["status"] == "graded", grading
