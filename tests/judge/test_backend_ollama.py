"""The Ollama backend against the real ``ollama`` client, with respx in place of a server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import respx

from judge.backends.ollama import OllamaBackend, estimate_num_ctx
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

BASE = "http://127.0.0.1:18434"
MODEL = "qwen3:8b"
DIGEST = "sha256:500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answers": {"type": "array"}},
    "required": ["answers"],
}
REPLY = '{"answers": []}'
FAST = RetryPolicy(initial_wait=0.01, max_wait=0.05, jitter=0)


def make_request(**params: Any) -> JudgeRequest:
    return JudgeRequest(
        messages=(
            ChatMessage(role="system", content="You grade diagnoses."),
            ChatMessage(role="user", content="Ground truth: disk full. Diagnosis: disk full."),
        ),
        reply_schema=SCHEMA,
        params=SamplingParams(**params),
    )


def chat_reply(content: str = REPLY, **extra: Any) -> httpx.Response:
    body = {
        "model": MODEL,
        "created_at": "2025-05-01T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 812,
        "eval_count": 143,
        **extra,
    }
    return httpx.Response(200, json=body)


def tags_reply(*models: tuple[str, str]) -> httpx.Response:
    entries = [
        {"name": name, "model": name, "digest": digest, "size": 5_200_000_000}
        for name, digest in models
    ]
    return httpx.Response(200, json={"models": entries})


def error_reply(status: int, error: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, json={"error": error}, headers=headers)


@pytest.fixture
def ollama_api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        yield router


@pytest.fixture
async def backend() -> AsyncIterator[OllamaBackend]:
    judge = OllamaBackend(MODEL, base_url=BASE)
    yield judge
    await judge.aclose()


def sent_json(route: respx.Route, index: int = -1) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


async def test_request_carries_schema_and_sampling_settings(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=chat_reply())
    ollama_api.get("/api/tags").mock(return_value=tags_reply((MODEL, DIGEST)))

    await backend.complete(make_request(temperature=0.3, seed=42, max_tokens=900, num_ctx=8192))

    body = sent_json(chat)
    assert body["model"] == MODEL
    assert body["messages"] == [
        {"role": "system", "content": "You grade diagnoses."},
        {"role": "user", "content": "Ground truth: disk full. Diagnosis: disk full."},
    ]
    assert body["format"] == SCHEMA
    assert body["stream"] is False
    assert body["options"] == {
        "temperature": 0.3,
        "seed": 42,
        "num_predict": 900,
        "num_ctx": 8192,
    }


async def test_num_ctx_is_estimated_from_the_prompt(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=chat_reply())
    ollama_api.get("/api/tags").mock(return_value=tags_reply((MODEL, DIGEST)))
    request = JudgeRequest(
        messages=(ChatMessage(role="user", content="x" * 30_000),),
        reply_schema=SCHEMA,
        params=SamplingParams(max_tokens=1536, seed=None),
    )

    await backend.complete(request)

    options = sent_json(chat)["options"]
    assert options["num_ctx"] == 12288  # 10_000 + 1536 + 256 = 11_792, rounded up
    assert "seed" not in options  # None is not sent


@pytest.mark.parametrize(
    ("chars", "max_tokens", "expected"),
    [(0, 16, 2048), (3000, 1536, 3072), (30_000, 1536, 12288), (3 * 1024, 768, 2048)],
)
def test_estimate_num_ctx(chars: int, max_tokens: int, expected: int) -> None:
    request = JudgeRequest(
        messages=(ChatMessage(role="user", content="y" * chars),),
        reply_schema=SCHEMA,
        params=SamplingParams(max_tokens=max_tokens),
    )
    assert estimate_num_ctx(request) == expected


async def test_host_defaults_to_ollama_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:18435")
    judge = OllamaBackend(MODEL)
    try:
        with respx.mock(base_url="http://127.0.0.1:18435", assert_all_called=True) as router:
            router.post("/api/chat").mock(return_value=chat_reply())
            router.get("/api/tags").mock(return_value=tags_reply((MODEL, DIGEST)))
            completion = await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert completion.fingerprint == DIGEST


async def test_reply_becomes_completion_with_digest(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=chat_reply())
    ollama_api.get("/api/tags").mock(
        return_value=tags_reply(("llama3:latest", "sha256:other"), (MODEL, DIGEST))
    )

    completion = await backend.complete(make_request())

    assert completion.text == REPLY
    assert completion.model == MODEL
    assert completion.fingerprint == DIGEST
    assert completion.prompt_tokens == 812
    assert completion.completion_tokens == 143
    assert completion.response_format == "json_schema"


async def test_digest_is_fetched_once_per_backend(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=chat_reply())
    tags = ollama_api.get("/api/tags").mock(return_value=tags_reply((MODEL, DIGEST)))

    first = await backend.complete(make_request())
    second = await backend.complete(make_request())

    assert chat.call_count == 2
    assert tags.call_count == 1
    assert first.fingerprint == second.fingerprint == DIGEST


async def test_untagged_model_matches_latest(ollama_api: respx.MockRouter) -> None:
    ollama_api.post("/api/chat").mock(return_value=chat_reply(model="gemma3:latest"))
    ollama_api.get("/api/tags").mock(return_value=tags_reply(("gemma3:latest", DIGEST)))
    judge = OllamaBackend("gemma3", base_url=BASE)
    try:
        completion = await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert completion.fingerprint == DIGEST
    assert completion.model == "gemma3:latest"


async def test_failing_digest_lookup_does_not_fail_the_call(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=chat_reply())
    ollama_api.get("/api/tags").mock(return_value=error_reply(500, "boom"))

    completion = await backend.complete(make_request())

    assert completion.text == REPLY
    assert completion.fingerprint is None


async def test_empty_content_is_returned_as_is(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=chat_reply(content=""))
    ollama_api.get("/api/tags").mock(return_value=tags_reply())

    completion = await backend.complete(make_request())

    assert completion.text == ""
    assert completion.fingerprint is None  # model not listed


@pytest.mark.parametrize(
    ("response", "expected", "status"),
    [
        (error_reply(500, "llama runner process has terminated"), JudgeUnavailable, 500),
        (error_reply(503, "server busy"), JudgeUnavailable, 503),
        (error_reply(401, "unauthorized"), JudgeAuthError, 401),
        (error_reply(403, "forbidden"), JudgeAuthError, 403),
        (error_reply(404, 'model "qwen3:8b" not found, try pulling it first'), JudgeRejected, 404),
        (error_reply(400, "invalid format: expected object"), JudgeRejected, 400),
        (
            error_reply(400, "input length exceeds maximum context length"),
            ContextOverflow,
            400,
        ),
        (error_reply(400, "the prompt is too long"), ContextOverflow, 400),
    ],
)
async def test_error_statuses_are_mapped(
    ollama_api: respx.MockRouter,
    backend: OllamaBackend,
    response: httpx.Response,
    expected: type[JudgeCallError],
    status: int,
) -> None:
    ollama_api.post("/api/chat").mock(return_value=response)

    with pytest.raises(expected) as caught:
        await backend.complete(make_request())

    assert type(caught.value) is expected
    assert caught.value.status_code == status
    assert caught.value.__cause__ is not None


@pytest.mark.parametrize(("header", "seconds"), [("0", 0.0), ("7", 7.0), (None, None)])
async def test_429_is_rate_limited_with_retry_after(
    ollama_api: respx.MockRouter,
    backend: OllamaBackend,
    header: str | None,
    seconds: float | None,
) -> None:
    headers = {"Retry-After": header} if header is not None else None
    ollama_api.post("/api/chat").mock(return_value=error_reply(429, "too many requests", headers))

    with pytest.raises(JudgeRateLimited) as caught:
        await backend.complete(make_request())

    assert caught.value.status_code == 429
    assert caught.value.retry_after == seconds


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
    ollama_api: respx.MockRouter,
    backend: OllamaBackend,
    failure: Exception,
    expected: type[JudgeCallError],
) -> None:
    ollama_api.post("/api/chat").mock(side_effect=failure)

    with pytest.raises(expected) as caught:
        await backend.complete(make_request())

    assert caught.value.__cause__ is not None


async def test_unreadable_reply_is_unavailable(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=httpx.Response(200, text="<html>proxy</html>"))

    with pytest.raises(JudgeUnavailable):
        await backend.complete(make_request())


async def test_retry_after_429_then_success(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(
        side_effect=[error_reply(429, "slow down", {"Retry-After": "0"}), chat_reply()]
    )
    ollama_api.get("/api/tags").mock(return_value=tags_reply((MODEL, DIGEST)))

    completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)

    assert completion.text == REPLY
    assert chat.call_count == 2
    assert [a.outcome for a in attempts] == ["judge_rate_limited", "ok"]
    assert attempts[0].retry_after == 0.0


async def test_auth_error_is_not_retried(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=error_reply(401, "unauthorized"))

    with pytest.raises(JudgeAuthError) as caught:
        await complete_with_retries(backend, make_request(), policy=FAST)

    assert chat.call_count == 1
    assert len(caught.value.attempts) == 1


async def test_server_errors_give_up_after_max_attempts(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=error_reply(500, "runner crashed"))

    with pytest.raises(JudgeUnavailable) as caught:
        await complete_with_retries(backend, make_request(), policy=FAST)

    assert chat.call_count == FAST.max_attempts
    assert [a.status_code for a in caught.value.attempts] == [500] * FAST.max_attempts
