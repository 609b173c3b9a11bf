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
from tests.api.cli.test_audit import audit
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


class CuttingJudge(ScriptedBackend):
    """Every reply stops at its budget (``finish_reason: length``), half written, a NUL
    in it."""

    def __init__(self) -> None:
        super().__init__([scripted_reply] * 4, model="scripted")
        self.sent: list[str] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        whole = await super().complete(request)
        text = whole.text[: len(whole.text) // 2] + f"\u0000 <cut reply {len(self.sent) + 1}>"
        self.sent.append(text)
        return whole.model_copy(
            update={"text": text, "finish_reason": "length", "completion_tokens": 1536}
        )


async def test_the_replies_of_a_grading_unscored_as_cut_are_kept_as_sent(
    api_client: Any, tokens: Any, database_url: str
) -> None:
    """A reply cut at its token budget is never parsed, but it is what the judge server
    sent: the grading unscored ``reply_truncated`` shows each cut reply on the attempt
    that got it, in the judge call of its history (a NUL left out, as everywhere), and
    the audit log covers the call as it is stored."""
    backend = CuttingJudge()
    admin = await tokens("admin")
    async with api_client(judge=SPEC, backends={SPEC: backend}) as client:
        posted = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=admin,
        )
        grading = posted.json()
        history = (await client.get(f"/v1/gradings/{grading['id']}/history", headers=admin)).json()
    assert grading["unscored_reason"] == "reply_truncated", grading
    assert len(backend.sent) == 2  # cut, asked again with a larger budget, cut again
    [call] = [e["call"] for e in history["events"] if e["event"] == "judge.call"]
    assert call["response_text"] is None
    assert [a["outcome"] for a in call["attempts"]] == ["reply_truncated"] * 2
    assert [a["reply"] for a in call["attempts"]] == [
        text.replace("\u0000", "") for text in backend.sent
    ]
    verified = await audit(database_url, "verify")
    assert verified.exit_code == 0, verified.output
