"""Reply formats (issue 18, item 3): ``full`` replies carry reasoning, evidence and
confidence; ``compact`` ones only the answer and, for [quote] questions, the quote.

The real ``openai`` client talks to the local test judge server, so what is checked is
what a judge really receives (prompt and JSON schema) and what the service makes of
its reply.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from judge.backends.openai import OpenAIBackend
from judge.backends.streaming import StreamLimits
from judge.grader import Grader
from judge.reply import ReplyInvalid, parse_answer_reply, parse_reply
from judge.retry import RetryPolicy
from judge.rubric import Rubric, load_rubric_dir
from tests.support.judge_server import running_judge_server

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
QUOTE = "sets USER_PORT=9999"
FAST = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01, jitter=0)


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def compact_reply(rubric: Rubric, yes: set[str], quote: str = QUOTE) -> str:
    """A compact reply: the answer, and the quote of [quote] questions."""
    entries: dict[str, Any] = {}
    for q in rubric.questions:
        entry: dict[str, Any] = {"answer": "yes" if q.id in yes else "no"}
        if q.requires_quote:
            entry["quote"] = quote if q.id in yes else ""
        entries[q.id] = entry
    return json.dumps(entries)


async def _grade(rubric: Rubric, replies: list[str], **grader: Any) -> tuple[Any, list[Any]]:
    with running_judge_server(replies=list(replies)) as server:
        backend = OpenAIBackend(
            "m", base_url=server.openai_url, limits=StreamLimits(5, 5, None), logprobs=False
        )
        try:
            result = await Grader(backend, retry=FAST, **grader).grade(rubric, TRUTH, DIAGNOSIS)
        finally:
            await backend.aclose()
        return result, server.requests


def test_compact_parser_takes_answer_and_quote_only(rubric: Rubric) -> None:
    all_yes = {q.id for q in rubric.questions}
    parsed = parse_reply(compact_reply(rubric, all_yes), rubric, reply_format="compact")
    assert parsed["D1-Q1"].evidence == QUOTE and parsed["D1-Q1"].reasoning == ""
    assert parsed["D1-Q3"].answer is True and parsed["D1-Q3"].confidence is None


def test_compact_parser_refuses_the_full_format(rubric: Rubric) -> None:
    full = {
        q.id: {"reasoning": "r", "evidence": "", "answer": "no", "confidence": "high"}
        for q in rubric.questions
    }
    with pytest.raises(ReplyInvalid) as caught:
        parse_reply(json.dumps(full), rubric, reply_format="compact")
    assert "D1-Q1: unexpected key(s) confidence, evidence, reasoning" in str(caught.value)


def test_compact_parser_refuses_a_quote_where_none_was_asked(rubric: Rubric) -> None:
    reply = json.loads(compact_reply(rubric, set()))
    reply["D1-Q3"]["quote"] = "anything"
    with pytest.raises(ReplyInvalid, match="D1-Q3: unexpected key"):
        parse_reply(json.dumps(reply), rubric, reply_format="compact")
    with pytest.raises(ReplyInvalid, match="unexpected key"):
        parse_answer_reply(
            '{"answer": "no", "quote": ""}', "D1-Q3", reply_format="compact", quote=False
        )


def test_compact_parser_refuses_an_entry_whose_own_id_names_another_question(
    rubric: Rubric,
) -> None:
    """A compact entry may carry its id; one naming another question than its key is
    refused, not graded under the key."""
    ids = [q.id for q in rubric.questions]
    shifted = {qid: {"id": ids[(i + 1) % len(ids)], "answer": "yes"} for i, qid in enumerate(ids)}
    with pytest.raises(ReplyInvalid, match="the reply answers 'D1-Q2', not D1-Q1"):
        parse_reply(json.dumps(shifted), rubric, reply_format="compact")


def test_full_parser_refuses_a_compact_reply(rubric: Rubric) -> None:
    with pytest.raises(ReplyInvalid, match="D1-Q1: quote is not a key of this format"):
        parse_reply(compact_reply(rubric, {"D1-Q1"}), rubric)


async def test_compact_grading_asks_compactly_and_grades(rubric: Rubric) -> None:
    yes = {q.id for q in rubric.questions} - {"D2-Q1"}
    result, requests = await _grade(rubric, [compact_reply(rubric, yes)], reply_format="compact")
    system = requests[0]["messages"][0]["content"]
    assert "give only the answer" in system and "reasoning (one or two" not in system
    schema = requests[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]["D1-Q1"]["properties"]) == {"answer", "quote"}
    assert set(schema["properties"]["D1-Q3"]["properties"]) == {"answer"}
    assert result.status == "graded" and result.outcome.yes_count == 8
    assert result.outcome.passed and not result.needs_review


async def test_compact_yes_without_quote_is_unverified_only_where_a_quote_was_asked(
    rubric: Rubric,
) -> None:
    yes = {q.id for q in rubric.questions}
    result, _ = await _grade(rubric, [compact_reply(rubric, yes, quote="")], reply_format="compact")
    unverified = {a.question_id for a in result.answers if a.evidence_verified is False}
    assert unverified == {q.id for q in rubric.questions if q.requires_quote}
    assert result.review_reasons == ("evidence_unverified",)


async def test_a_full_reply_to_a_compact_request_gets_a_repair_naming_the_format(
    rubric: Rubric,
) -> None:
    full = {
        q.id: {"reasoning": "r", "evidence": QUOTE, "answer": "yes", "confidence": "high"}
        for q in rubric.questions
    }
    replies = [json.dumps(full), compact_reply(rubric, {"D1-Q1"})]
    result, requests = await _grade(rubric, replies, reply_format="compact")
    assert [c.purpose for c in result.calls] == ["grade", "repair"]
    repair = requests[1]["messages"][-1]["content"]
    assert "for [quote] questions, quote: nothing else" in repair
    assert result.status == "graded"


async def test_per_question_compact_asks_each_question_its_own_fields(rubric: Rubric) -> None:
    replies = [
        json.dumps({"answer": "yes", "quote": QUOTE} if q.requires_quote else {"answer": "yes"})
        for q in rubric.questions
    ]
    result, requests = await _grade(rubric, replies, reply_format="compact", asking="per_question")
    schemas = [r["response_format"]["json_schema"]["schema"] for r in requests]
    assert [set(s["properties"]) for s in schemas[:3]] == [
        {"answer", "quote"},
        {"answer", "quote"},
        {"answer"},
    ]
    assert result.status == "graded" and result.outcome.yes_count == 9
