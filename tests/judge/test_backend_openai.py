"""The OpenAI-compatible backend against the real ``openai`` client, with respx as server."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
import respx

from judge.backends.http import parse_retry_after
from judge.backends.openai import OpenAIBackend, forget_response_formats
from judge.calls import ChatMessage, JudgeRequest, SamplingParams
from judge.errors import (
    ContextOverflow,
    JudgeAuthError,
    JudgeCallError,
    JudgeRateLimited,
    JudgeRejected,
    JudgeTimeout,
    JudgeUnavailable,
)
from judge.retry import RetryPolicy, complete_with_retries

BASE = "http://127.0.0.1:18080/v1"
OTHER_BASE = "http://127.0.0.1:18081/v1"
MODEL = "qwen2.5-1.5b"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answers": {"type": "array"}},
    "required": ["answers"],
}
REPLY = '{"answers": []}'
FAST = RetryPolicy(initial_wait=0.01, max_wait=0.05, jitter=0)
JSON_SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "judge_reply", "strict": True, "schema": SCHEMA},
}
JSON_OBJECT_FORMAT = {"type": "json_object", "schema": SCHEMA}


def make_request(**params: Any) -> JudgeRequest:
    return JudgeRequest(
        messages=(
            ChatMessage(role="system", content="You grade diagnoses."),
            ChatMessage(role="user", content="Ground truth: disk full. Diagnosis: disk full."),
        ),
        reply_schema=SCHEMA,
        params=SamplingParams(**params),
    )


def completion_reply(content: str | None = REPLY, **extra: Any) -> httpx.Response:
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_746_000_000,
        "model": MODEL,
        "system_fingerprint": "b5123-8c2a1f",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 812, "completion_tokens": 143, "total_tokens": 955},
        **extra,
    }
    return httpx.Response(200, json=body)


def error_reply(status: int, message: str, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return httpx.Response(status, json=body, headers=headers)


@pytest.fixture(autouse=True)
def _fresh_format_memory() -> Iterator[None]:
    forget_response_formats()
    yield
    forget_response_formats()


@pytest.fixture
def openai_api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        yield router


@pytest.fixture
async def backend() -> AsyncIterator[OpenAIBackend]:
    judge = OpenAIBackend(MODEL, base_url=BASE, api_key="sk-test")
    yield judge
    await judge.aclose()


def sent_json(route: respx.Route, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


async def test_request_carries_schema_and_sampling_settings(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=completion_reply())

    await backend.complete(make_request(temperature=0.3, seed=42, max_tokens=900))

    body = sent_json(route)
    assert body["model"] == MODEL
    assert body["messages"] == [
        {"role": "system", "content": "You grade diagnoses."},
        {"role": "user", "content": "Ground truth: disk full. Diagnosis: disk full."},
    ]
    assert body["temperature"] == 0.3
    assert body["seed"] == 42
    assert body["max_tokens"] == 900
    assert body["response_format"] == JSON_SCHEMA_FORMAT
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-test"


async def test_absent_seed_is_not_sent(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=completion_reply())

    await backend.complete(make_request(seed=None))

    assert "seed" not in sent_json(route)


async def test_api_key_defaults(
    openai_api: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=completion_reply())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = OpenAIBackend(MODEL, base_url=BASE)
    try:
        await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-no-key"


async def test_endpoint_defaults_to_openai_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", OTHER_BASE)
    judge = OpenAIBackend(MODEL, api_key="k")
    try:
        with respx.mock(assert_all_called=True) as router:
            route = router.post(f"{OTHER_BASE}/chat/completions").mock(
                return_value=completion_reply()
            )
            await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert route.call_count == 1
    assert judge.base_url is None
    assert judge.endpoint == f"{OTHER_BASE}/"


async def test_reply_becomes_completion(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    openai_api.post("/chat/completions").mock(
        return_value=completion_reply(model="qwen2.5-1.5b-instruct-q4_k_m.gguf")
    )

    completion = await backend.complete(make_request())

    assert completion.text == REPLY
    assert completion.model == "qwen2.5-1.5b-instruct-q4_k_m.gguf"
    assert completion.fingerprint == "b5123-8c2a1f"
    assert completion.prompt_tokens == 812
    assert completion.completion_tokens == 143
    assert completion.response_format == "json_schema"


@pytest.mark.parametrize(
    "reply",
    [
        completion_reply(content=None),
        completion_reply(choices=[]),
        httpx.Response(200, json={"id": "x", "object": "chat.completion", "model": MODEL}),
    ],
    ids=["content-none", "no-choices", "bare"],
)
async def test_missing_content_becomes_empty_text(
    openai_api: respx.MockRouter, backend: OpenAIBackend, reply: httpx.Response
) -> None:
    openai_api.post("/chat/completions").mock(return_value=reply)

    completion = await backend.complete(make_request())

    assert completion.text == ""
    assert completion.model == MODEL


async def test_json_schema_refused_with_500_falls_back_and_is_remembered(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(500, "Internal Server Error"), completion_reply()]
    )

    completion = await backend.complete(make_request())

    assert route.call_count == 2
    assert sent_json(route, 0)["response_format"] == JSON_SCHEMA_FORMAT
    assert sent_json(route, 1)["response_format"] == JSON_OBJECT_FORMAT
    assert completion.response_format == "json_object"

    route.side_effect = None
    route.return_value = completion_reply()
    later = OpenAIBackend(MODEL, base_url=BASE, api_key="sk-test")
    try:
        again = await later.complete(make_request())
    finally:
        await later.aclose()

    assert route.call_count == 3
    assert sent_json(route)["response_format"] == JSON_OBJECT_FORMAT
    assert again.response_format == "json_object"


async def test_fallback_memory_is_per_endpoint() -> None:
    one = OpenAIBackend(MODEL, base_url=BASE, api_key="k")
    two = OpenAIBackend(MODEL, base_url=OTHER_BASE, api_key="k")
    with respx.mock(assert_all_called=True) as router:
        first = router.post(f"{BASE}/chat/completions").mock(
            side_effect=[error_reply(500, "Internal Server Error"), completion_reply()]
        )
        other = router.post(f"{OTHER_BASE}/chat/completions").mock(return_value=completion_reply())
        try:
            await one.complete(make_request())
            completion = await two.complete(make_request())
        finally:
            await one.aclose()
            await two.aclose()

    assert first.call_count == 2
    assert sent_json(other)["response_format"] == JSON_SCHEMA_FORMAT
    assert completion.response_format == "json_schema"


async def test_json_schema_refused_with_400_falls_back(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[
            error_reply(400, "Unsupported response_format type: json_schema"),
            completion_reply(),
        ]
    )

    completion = await backend.complete(make_request())

    assert route.call_count == 2
    assert completion.response_format == "json_object"


async def test_failed_fallback_is_mapped_and_not_remembered(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(500, "down"), error_reply(503, "still down"), completion_reply()]
    )

    with pytest.raises(JudgeUnavailable) as caught:
        await backend.complete(make_request())

    assert caught.value.status_code == 503
    assert route.call_count == 2
    await backend.complete(make_request())
    assert sent_json(route)["response_format"] == JSON_SCHEMA_FORMAT


async def test_plain_bad_request_does_not_fall_back(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        return_value=error_reply(400, "'messages' must contain at least one message")
    )

    with pytest.raises(JudgeRejected):
        await backend.complete(make_request())

    assert route.call_count == 1


@pytest.mark.parametrize(
    ("response", "expected", "status", "calls"),
    [
        (error_reply(500, "Internal Server Error"), JudgeUnavailable, 500, 2),
        (error_reply(401, "Incorrect API key provided"), JudgeAuthError, 401, 1),
        (error_reply(403, "Forbidden"), JudgeAuthError, 403, 1),
        (error_reply(404, "The model `gpt-9` does not exist"), JudgeRejected, 404, 1),
        (error_reply(422, "Unprocessable"), JudgeRejected, 422, 1),
        (
            error_reply(
                400,
                "This model's maximum context length is 4096 tokens. However, you "
                "requested 5000 tokens. Please reduce the length of the messages.",
            ),
            ContextOverflow,
            400,
            1,
        ),
        (
            error_reply(400, "the request exceeds the available context size, try increasing it"),
            ContextOverflow,
            400,
            1,
        ),
    ],
)
async def test_error_statuses_are_mapped(
    openai_api: respx.MockRouter,
    backend: OpenAIBackend,
    response: httpx.Response,
    expected: type[JudgeCallError],
    status: int,
    calls: int,
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=response)

    with pytest.raises(expected) as caught:
        await backend.complete(make_request())

    assert type(caught.value) is expected
    assert caught.value.status_code == status
    assert caught.value.__cause__ is not None
    assert route.call_count == calls


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [({"Retry-After": "0"}, 0.0), ({"Retry-After": "12"}, 12.0), ({}, None)],
)
async def test_429_is_rate_limited_with_retry_after(
    openai_api: respx.MockRouter,
    backend: OpenAIBackend,
    headers: dict[str, str],
    seconds: float | None,
) -> None:
    route = openai_api.post("/chat/completions").mock(
        return_value=error_reply(429, "Rate limit reached", headers)
    )

    with pytest.raises(JudgeRateLimited) as caught:
        await backend.complete(make_request())

    assert caught.value.status_code == 429
    assert caught.value.retry_after == seconds
    assert route.call_count == 1  # the client itself does not retry


def test_retry_after_forms() -> None:
    soon = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (parse_retry_after(httpx.Headers({"Retry-After": soon})) or 0) <= 30
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(httpx.Headers({"Retry-After": past})) == 0.0
    assert parse_retry_after(httpx.Headers({"retry-after-ms": "1500"})) == 1.5
    assert parse_retry_after(httpx.Headers({"Retry-After": "soon"})) is None


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (httpx.ReadTimeout("timed out"), JudgeTimeout),
        (httpx.ConnectTimeout("timed out"), JudgeTimeout),
        (httpx.ConnectError("[Errno 111] Connection refused"), JudgeUnavailable),
        (httpx.RemoteProtocolError("server disconnected"), JudgeUnavailable),
    ],
)
async def test_transport_failures_are_mapped(
    openai_api: respx.MockRouter,
    backend: OpenAIBackend,
    failure: Exception,
    expected: type[JudgeCallError],
) -> None:
    route = openai_api.post("/chat/completions").mock(side_effect=failure)

    with pytest.raises(expected) as caught:
        await backend.complete(make_request())

    assert type(caught.value) is expected
    assert caught.value.__cause__ is not None
    assert route.call_count == 1


async def test_retry_after_429_then_success(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(429, "slow down", {"Retry-After": "0"}), completion_reply()]
    )

    completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)

    assert completion.text == REPLY
    assert route.call_count == 2
    assert [a.outcome for a in attempts] == ["judge_rate_limited", "ok"]
    assert attempts[0].retry_after == 0.0


async def test_auth_error_is_not_retried(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=error_reply(401, "bad key"))

    with pytest.raises(JudgeAuthError) as caught:
        await complete_with_retries(backend, make_request(), policy=FAST)

    assert route.call_count == 1
    assert len(caught.value.attempts) == 1


async def test_server_errors_give_up_after_max_attempts(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(return_value=error_reply(500, "boom"))

    with pytest.raises(JudgeUnavailable) as caught:
        await complete_with_retries(backend, make_request(), policy=FAST)

    # each attempt is json_schema then its one json_object fallback
    assert route.call_count == 2 * FAST.max_attempts
    assert [a.status_code for a in caught.value.attempts] == [500] * FAST.max_attempts


# --- token log-probabilities: asked for, fallback, confidence; per-question asking ---

LOG_08, LOG_02 = math.log(0.8), math.log(0.2)


def _token(text: str, top: list[tuple[str, float]] | None = None) -> dict[str, Any]:
    alternatives = top or [(text, -0.01)]
    return {
        "token": text,
        "logprob": alternatives[0][1],
        "bytes": None,
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
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    route = openai_api.post("/chat/completions").mock(
        side_effect=[
            error_reply(400, "logprobs is not supported by this server"),
            completion_reply(),
            completion_reply(),
        ]
    )
    first = await backend.complete(make_request())
    await backend.complete(make_request())
    assert first.text == REPLY and first.logprobs is None
    assert route.call_count == 3
    assert sent_json(route, 0)["logprobs"] is True
    assert "logprobs" not in sent_json(route, 1)
    assert "logprobs" not in sent_json(route, 2)  # remembered: no second refusal


async def test_answer_confidence_comes_from_the_answer_tokens_logprobs(
    openai_api: respx.MockRouter, backend: OpenAIBackend
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
    result = await Grader(backend, retry=FAST).grade(rubric, truth, diagnosis)
    assert result.status == "graded"
    confidence = {a.question_id: a.confidence for a in result.answers}
    # P(yes) / (P(yes) + P(no)) = 0.8 for a yes; for the "no" it is the confidence in no
    assert confidence["D1-Q1"] == pytest.approx(0.8)
    assert confidence["D3-Q3"] == pytest.approx(0.8)
    completion = result.calls[0].completion
    assert completion is not None and completion.logprobs is not None


async def test_per_question_calls_share_a_byte_identical_prefix_and_ask_one_question(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    from judge.grader import Grader
    from judge.rubric import load_rubric_dir

    rubric = load_rubric_dir()["sregym-rca"]
    ids = [q.id for q in rubric.questions]

    def answer(request: httpx.Request) -> httpx.Response:
        last = json.loads(request.content)["messages"][-1]["content"]
        asked = [qid for qid in ids if f"Question {qid}" in last]
        assert len(asked) == 1
        entry = {"reasoning": "r", "evidence": "", "answer": "no", "confidence": "low"}
        return completion_reply(json.dumps(entry))

    route = openai_api.post("/chat/completions").mock(side_effect=answer)
    grader = Grader(backend, retry=FAST, asking="per_question")
    result = await grader.grade(rubric, "[fault_spec] component=deployment/a || x", "a is down")

    assert result.status == "graded" and len(result.calls) == 9 and route.call_count == 9
    bodies = [sent_json(route, i) for i in range(9)]
    systems = {b["messages"][0]["content"] for b in bodies}
    assert len(systems) == 1
    users = [b["messages"][1]["content"] for b in bodies]
    prefix = users[0][: users[0].index("Question ")]
    assert "<<<DIAGNOSIS" in prefix and "<<<GROUND_TRUTH" in prefix
    for qid, user in zip(ids, users, strict=True):
        assert user.startswith(prefix)
        question = user[len(prefix) :]
        assert question.startswith(f"Question {qid}")
        assert [other for other in ids if other in question] == [qid]
    schema = bodies[0]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"reasoning", "evidence", "answer", "confidence"}
    assert {a.question_id: a.confidence for a in result.answers}["D1-Q1"] == 0.3


async def test_llama_cpp_refusal_of_logprobs_with_500_falls_back_too(
    openai_api: respx.MockRouter, backend: OpenAIBackend
) -> None:
    refusal = "logprobs is not supported for models created with logits_all=False"
    route = openai_api.post("/chat/completions").mock(
        side_effect=[error_reply(500, refusal), completion_reply()]
    )
    completion = await backend.complete(make_request())
    assert completion.response_format == "json_schema"  # not mistaken for a format refusal
    assert [("logprobs" in sent_json(route, i)) for i in range(2)] == [True, False]
