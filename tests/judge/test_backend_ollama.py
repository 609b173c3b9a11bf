"""What only the Ollama backend does: ``num_ctx``, the model digest, ``OLLAMA_HOST``.

The behaviour both backends share is in ``test_backend_contract.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
import respx

from judge.backends.ollama import OllamaBackend, estimate_num_ctx
from judge.calls import ChatMessage, JudgeRequest, SamplingParams
from judge.errors import JudgeUnavailable
from tests.judge.backend_servers import (
    DIGEST,
    OLLAMA_BASE,
    OLLAMA_MODEL,
    REPLY,
    SCHEMA,
    make_request,
    ollama_chat_reply,
    ollama_error,
    ollama_tags_reply,
    sent_json,
)

BASE, MODEL = OLLAMA_BASE, OLLAMA_MODEL


@pytest.fixture
def ollama_api() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=True) as router:
        yield router


@pytest.fixture
async def backend() -> AsyncIterator[OllamaBackend]:
    judge = OllamaBackend(MODEL, base_url=BASE)
    yield judge
    await judge.aclose()


async def test_options_carry_the_given_context_window_and_ask_for_a_stream(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))

    await backend.complete(make_request(temperature=0.3, seed=42, max_tokens=900, num_ctx=8192))

    body = sent_json(chat)
    assert body["stream"] is True
    assert body["options"] == {
        "temperature": 0.3,
        "seed": 42,
        "num_predict": 900,
        "num_ctx": 8192,
    }


async def test_num_ctx_is_estimated_from_the_prompt(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))
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
            router.post("/api/chat").mock(return_value=ollama_chat_reply())
            router.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))
            completion = await judge.complete(make_request())
    finally:
        await judge.aclose()
    assert completion.fingerprint == DIGEST


async def test_digest_is_the_listed_models(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    ollama_api.get("/api/tags").mock(
        return_value=ollama_tags_reply(("llama3:latest", "sha256:other"), (MODEL, DIGEST))
    )

    completion = await backend.complete(make_request())

    assert completion.fingerprint == DIGEST


async def test_digest_is_fetched_once_per_backend(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    tags = ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))

    first = await backend.complete(make_request())
    second = await backend.complete(make_request())

    assert chat.call_count == 2
    assert tags.call_count == 1
    assert first.fingerprint == second.fingerprint == DIGEST


async def test_untagged_model_matches_latest(ollama_api: respx.MockRouter) -> None:
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply(model="gemma3:latest"))
    ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply(("gemma3:latest", DIGEST)))
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
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    ollama_api.get("/api/tags").mock(return_value=ollama_error(500, "boom"))

    completion = await backend.complete(make_request())

    assert completion.text == REPLY
    assert completion.fingerprint is None


@pytest.mark.parametrize("tags", [b"[]", b"null"], ids=["json-array", "null"])
async def test_a_tags_listing_that_is_no_object_leaves_the_digest_unknown(
    ollama_api: respx.MockRouter, backend: OllamaBackend, tags: bytes
) -> None:
    """An answered call is kept; only the digest is unknown, and a probe says the server
    answered oddly."""
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    media = {"content-type": "application/json"}
    ollama_api.get("/api/tags").mock(return_value=httpx.Response(200, content=tags, headers=media))

    completion = await backend.complete(make_request())

    assert completion.text == REPLY
    assert completion.fingerprint is None
    assert await backend.model_digest() is None
    with pytest.raises(JudgeUnavailable):
        await backend.probe()


async def test_empty_content_is_returned_as_is(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply(content=""))
    ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply())

    completion = await backend.complete(make_request())

    assert completion.text == ""
    assert completion.fingerprint is None  # model not listed


async def test_unreadable_reply_is_unavailable(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    ollama_api.post("/api/chat").mock(return_value=httpx.Response(200, text="<html>proxy</html>"))

    with pytest.raises(JudgeUnavailable):
        await backend.complete(make_request())


@pytest.mark.parametrize(
    ("reply", "status"),
    [
        (httpx.Response(503, json="service overloaded"), 503),  # an error body, a JSON string
        (httpx.Response(502, content=b"null", headers={"content-type": "application/json"}), 502),
        (httpx.Response(500, json=[{"error": "boom"}]), 500),  # an error body, a JSON array
        (httpx.Response(200, content=b"null\n"), None),  # a stream line that is no object
        (httpx.Response(200, content=b'{"error": {"message": "boom", "code": 500}}\n'), None),
    ],
    ids=["503-json-string", "502-null", "500-json-array", "200-null-line", "200-error-object"],
)
async def test_a_body_that_is_json_but_no_object_is_an_unavailable_judge(
    backend: OllamaBackend, reply: httpx.Response, status: int | None
) -> None:
    """Read by its status where it has one (a busy server behind a proxy answering 503
    ``"overloaded"``), else as an unreadable reply: retried, never a crash."""
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        router.post("/api/chat").mock(return_value=reply)
        router.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))
        with pytest.raises(JudgeUnavailable) as raised:
            await backend.complete(make_request())
    assert raised.value.status_code == status
