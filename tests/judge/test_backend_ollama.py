"""What only the Ollama backend does: ``num_ctx``, the model digest, ``OLLAMA_HOST``.

The behaviour both backends share is in ``test_backend_contract.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest
import respx

from judge.backends.ollama import OllamaBackend, estimate_num_ctx
from judge.backends.scripted import scripted_reply
from judge.backends.streaming import StreamLimits
from judge.calls import ChatMessage, JudgeRequest, SamplingParams
from judge.errors import JudgeUnavailable
from judge.grader import Grader
from judge.retry import RetryPolicy
from judge.rubric import load_rubric_dir
from tests.judge.backend_servers import (
    DIGEST,
    OLLAMA_BASE,
    OLLAMA_MODEL,
    REPLY,
    SCHEMA,
    latin1_page,
    make_request,
    ollama_chat_reply,
    ollama_error,
    ollama_tags_reply,
    sent_json,
    undecodable_gzip,
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


def _request(
    chars: int, max_tokens: int = 1536, *, seed: int | None = 0, num_ctx: int | None = None
) -> JudgeRequest:
    """A request of a prompt ``chars`` characters long."""
    return JudgeRequest(
        messages=(ChatMessage(role="user", content="y" * chars),),
        reply_schema=SCHEMA,
        params=SamplingParams(max_tokens=max_tokens, seed=seed, num_ctx=num_ctx),
    )


async def test_num_ctx_is_estimated_from_the_prompt(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    chat = ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))

    await backend.complete(_request(30_000, seed=None))

    options = sent_json(chat)["options"]
    # 10_000 + 1536 + 256 = 11_792 for the call, 1536 + 512 more for a repair: 13_840
    assert options["num_ctx"] == 14336
    assert "seed" not in options  # None is not sent


@pytest.mark.parametrize(
    ("chars", "max_tokens", "expected"),
    [(0, 16, 2048), (3000, 1536, 5120), (30_000, 1536, 14336), (3 * 1024, 768, 4096)],
)
def test_estimate_num_ctx(chars: int, max_tokens: int, expected: int) -> None:
    assert estimate_num_ctx(_request(chars, max_tokens)) == expected


def test_a_sized_window_is_kept_while_prompts_fit_it_and_given_up_when_far_too_large() -> None:
    """Ollama reloads its model for every change of ``num_ctx``: a window the backend
    sizes stays from call to call (prompts of lengths either side of a rounding step, a
    repair's longer one, a retry with twice the reply budget), grows for a prompt that
    does not fit, and is given up for one sized anew once a prompt's own would be at
    most half of it (a window grown for one long diagnosis is not held in memory)."""
    backend = OllamaBackend(MODEL, base_url=BASE)
    first = backend.window(_request(3_700))
    assert first == 5120
    assert backend.window(_request(3_900)) == first  # sized alone: 6144
    assert backend.window(_request(3_900 + 4_000)) == first  # a repair: the reply, more
    assert backend.window(_request(3_900, max_tokens=3072)) == first  # a cut reply's retry
    assert backend.window(_request(30_000)) == 14336  # does not fit: grows
    assert backend.window(_request(12_000)) == 14336  # sized alone: 8192, over half: kept
    assert backend.window(_request(1_000)) == 5120  # at most half: sized anew
    assert backend.window(_request(12_000, num_ctx=8192)) == 8192  # a configured window
    assert backend.window(_request(1_100)) == 5120  # ... leaves the sized one as it was


#: a ground truth and a diagnosis whose nine per-question prompts are 3,704 to 3,881
#: characters long: their windows sized one by one were 3072 and 4096
TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = (
    "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails. "
    + "Logs show connection refused on port 9999 again. " * 48
)


def _answering_each_question(request: httpx.Request) -> httpx.Response:
    """Ollama's answer to a per-question call: the scripted judge's reply to it."""
    body = json.loads(request.content)
    asked = JudgeRequest(
        messages=tuple(ChatMessage(**m) for m in body["messages"]),
        reply_schema=body["format"],
    )
    return ollama_chat_reply(scripted_reply(asked))


@pytest.mark.parametrize("configured", [None, 8192], ids=["sized", "configured"])
async def test_the_calls_of_one_per_question_grading_share_one_context_window(
    ollama_api: respx.MockRouter, backend: OllamaBackend, configured: int | None
) -> None:
    """Per-question asking opens every call with the same prefix so that Ollama reuses
    it: the nine calls go out with one ``num_ctx`` (else Ollama reloads the model
    between them and reuses nothing), and each call's record carries the window where
    one is configured."""
    chat = ollama_api.post("/api/chat").mock(side_effect=_answering_each_question)
    ollama_api.get("/api/tags").mock(return_value=ollama_tags_reply((MODEL, DIGEST)))
    grader = Grader(
        backend,
        params=SamplingParams(num_ctx=configured),
        retry=RetryPolicy(max_attempts=1),
        asking="per_question",
    )

    result = await grader.grade(load_rubric_dir()["sregym-rca"], TRUTH, DIAGNOSIS)

    assert result.status == "graded"
    windows = [json.loads(call.request.content)["options"]["num_ctx"] for call in chat.calls]
    assert len(windows) == 9
    assert len(set(windows)) == 1, f"one grading sent num_ctx {windows}"
    assert [call.request.params.num_ctx for call in result.calls] == [configured] * 9


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


async def test_a_failed_digest_lookup_is_not_asked_again_at_once(
    ollama_api: respx.MockRouter, backend: OllamaBackend
) -> None:
    """The calls after a failed look-up go without the digest for a while
    (``DIGEST_RETRY_SECONDS``) rather than each ask the server again."""
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    tags = ollama_api.get("/api/tags").mock(return_value=ollama_error(500, "boom"))

    first = await backend.complete(make_request())
    second = await backend.complete(make_request())

    assert tags.call_count == 1
    assert first.fingerprint is None and second.fingerprint is None


async def test_an_attempt_ends_within_the_overall_cap_while_the_digest_lookup_stalls() -> None:
    """``SRE_JUDGE_JUDGE_TIMEOUT`` bounds the whole attempt: a reply that came at once is
    kept, without a digest, once the cap passes with the server's ``/api/tags`` still
    silent; the next call does not wait for it again."""
    asked: list[httpx.Request] = []

    async def stall(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        await asyncio.sleep(30)
        return ollama_tags_reply((MODEL, DIGEST))

    limits = StreamLimits(first_token=1.0, idle=1.0, total=1.0)
    backend = OllamaBackend(MODEL, base_url=BASE, limits=limits)
    try:
        with respx.mock(base_url=BASE, assert_all_called=False) as api:  # tags: unanswered
            api.post("/api/chat").mock(return_value=ollama_chat_reply())
            api.get("/api/tags").mock(side_effect=stall)
            started = time.monotonic()
            completion = await backend.complete(make_request())
            took = time.monotonic() - started
            again = await backend.complete(make_request())
            both = time.monotonic() - started
    finally:
        await backend.aclose()

    assert completion.text == REPLY and completion.fingerprint is None
    assert took < 2.0, f"one attempt took {took:.1f} s under an overall cap of 1 s"
    assert again.text == REPLY and both - took < 0.5
    assert len(asked) == 1


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


@pytest.mark.parametrize("tags", [latin1_page, undecodable_gzip], ids=["latin1-page", "bad-gzip"])
async def test_a_tags_listing_that_cannot_be_read_leaves_the_digest_unknown(
    ollama_api: respx.MockRouter,
    backend: OllamaBackend,
    tags: Callable[[], httpx.Response],
) -> None:
    """The chat reply came whole; only the digest lookup failed (a web page in Latin-1,
    a body that does not decode): the completion is kept with an unknown digest, as for
    a 500 on ``/api/tags``, never thrown away."""
    ollama_api.post("/api/chat").mock(return_value=ollama_chat_reply())
    ollama_api.get("/api/tags").mock(side_effect=lambda request: tags())

    completion = await backend.complete(make_request())

    assert completion.text == REPLY
    assert completion.fingerprint is None
    assert await backend.model_digest() is None


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
