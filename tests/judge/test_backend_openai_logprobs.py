"""The OpenAI-compatible backend and log-probabilities: asked for by default, dropped
once and remembered when a server refuses them, and read into answer confidence.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
import respx

from judge.backends.openai import OpenAIBackend
from judge.retry import RetryPolicy, complete_with_retries
from tests.judge.backend_servers import (
    FAST,
    OPENAI_BASE,
    OPENAI_MODEL,
    REPLY,
    ask_with_retries,
    attempt_outcome,
    make_request,
    sent_json,
)
from tests.judge.backend_servers import openai_completion_reply as completion_reply
from tests.judge.backend_servers import openai_error as error_reply

BASE, MODEL = OPENAI_BASE, OPENAI_MODEL
LOG_08, LOG_02 = math.log(0.8), math.log(0.2)


def _token(
    text: str, top: list[tuple[str, float]] | None = None, *, raw: bytes | None = None
) -> dict[str, Any]:
    alternatives = top or [(text, -0.01)]
    return {
        "token": text,
        "logprob": alternatives[0][1],
        "bytes": list(raw) if raw is not None else None,
        "top_logprobs": [{"token": t, "logprob": lp, "bytes": None} for t, lp in alternatives],
    }


def _logprob_content(reply: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    """Tokens of a compact JSON reply; every answer value one token, 80% yes vs 20% no."""
    tokens: list[dict[str, Any]] = [_token("{")]
    for n, (qid, entry) in enumerate(reply.items()):
        tokens.append(_token(("," if n else "") + f'"{qid}":{{"answer":"'))
        said = entry["answer"]
        other = "no" if said == "yes" else "yes"
        tokens.append(_token(said, [(said, LOG_08), (other, LOG_02)]))
        tokens.append(_token(f'","evidence":"{entry["evidence"]}"}}'))
    tokens.append(_token("}"))
    return tokens


async def test_logprobs_are_asked_for_by_default_and_can_be_switched_off(
    openai_api: respx.MockRouter,
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=completion_reply())
    asking = OpenAIBackend(MODEL, base_url=BASE, api_key="sk-test")
    silent = OpenAIBackend(MODEL, base_url=BASE, api_key="sk-test", logprobs=False)
    await asking.complete(make_request())
    await silent.complete(make_request())
    assert sent_json(route, 0)["logprobs"] is True and sent_json(route, 0)["top_logprobs"] == 5
    assert "logprobs" not in sent_json(route, 1) and "top_logprobs" not in sent_json(route, 1)
    await asking.aclose()
    await silent.aclose()


async def test_logprobs_rejected_with_400_fall_back_once_and_are_remembered(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[
            error_reply(400, "logprobs is not supported by this server"),
            completion_reply(),
            completion_reply(),
        ]
    )
    first, outcomes = await ask_with_retries(openai_backend)
    await openai_backend.complete(make_request())
    assert outcomes == ["feature_refused 400", "ok"]
    assert first.text == REPLY and first.logprobs is None
    assert route.call_count == 3
    assert sent_json(route, 0)["logprobs"] is True
    assert "logprobs" not in sent_json(route, 1)
    assert "logprobs" not in sent_json(route, 2)  # remembered: no second refusal


async def test_llama_cpp_refusal_of_logprobs_with_500_falls_back_too(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    refusal = "logprobs is not supported for models created with logits_all=False"
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(500, refusal), completion_reply()]
    )
    completion, outcomes = await ask_with_retries(openai_backend)
    assert outcomes == ["feature_refused 500", "ok"]
    assert completion.response_format == "json_schema"  # not mistaken for a format refusal
    assert [("logprobs" in sent_json(route, i)) for i in range(2)] == [True, False]


async def test_refused_features_do_not_use_up_the_attempts(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    """llama-cpp-python refuses json_schema, then logprobs, each with a 500."""
    route = openai_api.post("/chat/completions").mock(
        side_effect=[
            error_reply(500, "Input should be 'text' or 'json_object': json_schema"),
            error_reply(500, "logprobs is not supported for models created with logits_all"),
            completion_reply(),
        ]
    )
    one = RetryPolicy(max_attempts=1, initial_wait=0.01, max_wait=0.01)

    completion, attempts = await complete_with_retries(openai_backend, make_request(), policy=one)

    assert [attempt_outcome(a) for a in attempts] == ["feature_refused 500"] * 2 + ["ok"]
    assert route.call_count == 3 and completion.response_format == "json_object"


async def test_answer_confidence_comes_from_the_answer_tokens_logprobs(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    from judge.grader import Grader
    from judge.rubric import load_rubric_dir

    rubric = load_rubric_dir()["sregym-rca"]
    diagnosis = "user-service in hotel sets USER_PORT=9999"
    reply = {
        q.id: {"answer": "no" if q.id == "D3-Q3" else "yes", "evidence": "USER_PORT=9999"}
        for q in rubric.questions
    }
    content = json.dumps(reply, separators=(",", ":"))
    logprobs = {"content": _logprob_content(reply)}
    assert "".join(t["token"] for t in logprobs["content"]) == content
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "logprobs": logprobs,
        "finish_reason": "stop",
    }
    body = {"id": "c-1", "object": "chat.completion", "created": 1, "model": MODEL}
    openai_api.post("/chat/completions").mock(
        return_value=httpx.Response(200, json={**body, "choices": [choice]})
    )
    truth = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
    result = await Grader(openai_backend, retry=FAST).grade(rubric, truth, diagnosis)
    assert result.status == "graded"
    confidence = {a.question_id: a.confidence for a in result.answers}
    # P(yes) / (P(yes) + P(no)) = 0.8 for a yes; for the "no" it is the confidence in no
    assert confidence["D1-Q1"] == pytest.approx(0.8)
    assert confidence["D3-Q3"] == pytest.approx(0.8)
    completion = result.calls[0].completion
    assert completion is not None and completion.logprobs is not None


async def test_a_character_split_over_tokens_keeps_the_answer_confidence(
    openai_api: respx.MockRouter, openai_backend: OpenAIBackend
) -> None:
    """A reply holding a character the tokenizer split over two tokens (an emoji in a
    reasoning) comes with those tokens named by their escaped bytes and the bytes in
    ``bytes``, as OpenAI and DeepSeek send them: every answer still gets its confidence
    from its answer token."""
    from judge.grader import Grader
    from judge.rubric import load_rubric_dir

    rubric = load_rubric_dir()["sregym-rca"]
    emoji = "\U0001f642".encode()
    reply = {q.id: {"reasoning": "named \U0001f642", "answer": "yes"} for q in rubric.questions}
    tokens: list[dict[str, Any]] = [_token("{", raw=b"{")]
    for n, qid in enumerate(reply):
        head = ("," if n else "") + f'"{qid}":{{"reasoning":"named '
        tokens.append(_token(head, raw=head.encode()))
        for half in (emoji[:2], emoji[2:]):
            tokens.append(_token("".join(f"\\x{b:02x}" for b in half), raw=half))
        tokens.append(_token('","answer":"', raw=b'","answer":"'))
        tokens.append(_token("yes", [("yes", LOG_02), ("no", LOG_08)], raw=b"yes"))
        tokens.append(_token('"}', raw=b'"}'))
    tokens.append(_token("}", raw=b"}"))
    content = json.dumps(reply, separators=(",", ":"), ensure_ascii=False)
    assert b"".join(bytes(t["bytes"]) for t in tokens) == content.encode()
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": content},
        "logprobs": {"content": tokens},
        "finish_reason": "stop",
    }
    body = {"id": "c-1", "object": "chat.completion", "created": 1, "model": MODEL}
    openai_api.post("/chat/completions").mock(
        return_value=httpx.Response(200, json={**body, "choices": [choice]})
    )
    truth = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
    diagnosis = "user-service in hotel sets USER_PORT=9999"
    result = await Grader(openai_backend, retry=FAST).grade(rubric, truth, diagnosis)
    assert result.status == "graded", result.detail
    # P(yes) / (P(yes) + P(no)) = 0.2 at each answer token, not the stated confidence
    assert {a.question_id: a.confidence for a in result.answers} == {
        q.id: pytest.approx(0.2) for q in rubric.questions
    }
