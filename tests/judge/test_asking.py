"""The one ask-with-repair loop and the judge caller both asking strategies use."""

from __future__ import annotations

import json
from functools import partial

import pytest

from judge.asking import Conversation, ask_with_repair
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.cache import MemoryJudgeCache
from judge.caller import JudgeCaller
from judge.calls import ChatMessage, JudgeRequest, SamplingParams
from judge.errors import JudgeRejected
from judge.grader import Grader
from judge.per_question import question_repair_message
from judge.reply import ParsedAnswer, parse_answer_reply
from judge.retry import RetryPolicy
from judge.rubric import load_rubric_dir
from tests.support.submissions import DIAGNOSIS, TRUTH

FAST = RetryPolicy(max_attempts=2, initial_wait=0.001, max_wait=0.01, jitter=0)
PROMPT = [ChatMessage(role="user", content="Question D1-Q1 (is it named?)")]
SCHEMA = {"type": "object"}
GOOD = json.dumps({"reasoning": "r", "evidence": "", "answer": "no", "confidence": "low"})


async def _ask(caller: JudgeCaller, *, label: str | None = "D1-Q1") -> Conversation[ParsedAnswer]:
    return await ask_with_repair(
        caller,
        PROMPT,
        SCHEMA,
        parse=partial(parse_answer_reply, question_id="D1-Q1"),
        repair_message=partial(question_repair_message, "D1-Q1"),
        label=label,
    )


async def test_a_usable_first_reply_is_one_call_and_is_cached() -> None:
    cache = MemoryJudgeCache()
    caller = JudgeCaller(ScriptedBackend([GOOD]), retry=FAST, cache=cache)
    asked = await _ask(caller)
    assert asked.reason is None and asked.parsed is not None and not asked.parsed.answer
    assert [c.purpose for c in asked.calls] == ["grade"]
    again = await _ask(JudgeCaller(ScriptedBackend([]), retry=FAST, cache=cache))
    assert again.calls[0].cached and again.calls[0].attempts == ()


async def test_a_bad_reply_is_repaired_once_then_given_up_with_both_reasons() -> None:
    caller = JudgeCaller(ScriptedBackend(["not json", GOOD]), retry=FAST)
    repaired = await _ask(caller)
    assert [c.purpose for c in repaired.calls] == ["grade", "repair"]
    assert repaired.completion is not None and repaired.completion.text == GOOD
    assert repaired.calls[1].request.messages[1].content == "not json"

    twice = await _ask(JudgeCaller(ScriptedBackend(["not json", "still not"]), retry=FAST))
    assert twice.reason == "unparseable_reply" and twice.parsed is None
    assert twice.detail is not None and twice.detail.startswith("D1-Q1: first reply: ")
    unlabelled = await _ask(JudgeCaller(ScriptedBackend(["x", "y"]), retry=FAST), label=None)
    assert unlabelled.detail is not None and unlabelled.detail.startswith("first reply: ")


async def test_a_repair_that_would_not_fit_is_not_sent() -> None:
    params = SamplingParams(max_tokens=16)
    caller = JudgeCaller(ScriptedBackend(["x" * 300]), params=params, context_tokens=60)
    asked = await _ask(caller)
    assert asked.reason == "context_overflow" and len(asked.calls) == 1
    assert asked.detail is not None
    assert asked.detail.endswith("the repair call would not fit the context window")


async def test_a_failed_call_ends_the_conversation_with_its_code() -> None:
    caller = JudgeCaller(ScriptedBackend([JudgeRejected("no such model", status_code=404)]))
    asked = await _ask(caller)
    assert asked.reason == "judge_rejected" and asked.detail == "no such model"
    [call] = asked.calls
    assert call.completion is None and call.error_code == "judge_rejected"
    assert (call.backend, call.model, len(call.attempts)) == ("scripted", "scripted", 1)


def _an_id_with_an_escaped_lone_surrogate(request: JudgeRequest) -> str:
    """A well-formed reply but for D1-Q1's id, which carries the JSON escape ``\\ud800``
    (a lone surrogate once decoded); the text itself is plain ASCII."""
    reply = json.loads(scripted_reply(request))
    reply["D1-Q1\ud800"] = reply.pop("D1-Q1")
    text = json.dumps(reply)
    assert text.isascii()
    return text


@pytest.mark.parametrize("cached", [True, False], ids=["cached", "uncached"])
async def test_a_reply_naming_an_id_with_a_lone_surrogate_is_repaired(cached: bool) -> None:
    """A reply whose question id holds an escaped lone surrogate gets its one repair call,
    and every prompt of the grading is storable text: the repair message names the id
    with U+FFFD, so the cache key and the audit trail (UTF-8) take it."""
    rubric = load_rubric_dir()["sregym-rca"]
    backend = ScriptedBackend([_an_id_with_an_escaped_lone_surrogate, scripted_reply])
    cache = MemoryJudgeCache() if cached else None
    result = await Grader(backend, retry=FAST, cache=cache).grade(rubric, TRUTH, DIAGNOSIS)
    assert result.status == "graded"
    assert [c.purpose for c in result.calls] == ["grade", "repair"]
    repair = result.calls[1].request.messages[-1].content
    assert "unknown question id D1-Q1\ufffd" in repair
    for call in result.calls:
        for message in call.request.messages:
            message.content.encode("utf-8")
