"""What every judge backend promises, checked against the real ``ollama`` and ``openai``
clients with respx in place of the servers.

One attempt per ``complete``; the request carries the prompt, the reply schema and the
sampling settings; error statuses and transport failures become ``judge.errors``
(one classification for both, ``judge.backends.http.status_error``); the retry policy
honours Retry-After (at most a day) and gives up on refusals; whatever else a backend
lets through is an unavailable judge, recorded and retried.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest
import respx

from judge.backends.base import JudgeBackend
from judge.backends.http import MAX_RETRY_AFTER, parse_retry_after
from judge.backends.scripted import ScriptedBackend
from judge.caller import JudgeCaller
from judge.errors import (
    RETRY_LATER,
    ContextOverflow,
    JudgeAuthError,
    JudgeCallError,
    JudgeRateLimited,
    JudgeRejected,
    JudgeTimeout,
    JudgeUnavailable,
)
from judge.retry import complete_with_retries
from tests.judge.backend_servers import (
    FAST,
    MESSAGES,
    REPLY,
    SCHEMA,
    SERVERS,
    Server,
    gzip_broken_after,
    latin1_page,
    make_request,
    sent_json,
    undecodable_gzip,
)


@pytest.fixture(params=SERVERS, ids=[s.name for s in SERVERS])
def server(request: pytest.FixtureRequest) -> Server:
    chosen: Server = request.param
    return chosen


@pytest.fixture
def api(server: Server) -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=server.base, assert_all_called=True) as router:
        yield router


@pytest.fixture
async def backend(server: Server) -> AsyncIterator[JudgeBackend]:
    judge = server.backend()
    yield judge
    await judge.aclose()


def answering(api: respx.MockRouter, server: Server) -> respx.Route:
    """The chat route answering well, with what else a successful call needs."""
    server.extra_routes(api)
    return api.post(server.chat_path).mock(return_value=server.reply())


async def test_request_carries_prompt_schema_and_sampling_settings(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    route = answering(api, server)

    await backend.complete(make_request(temperature=0.3, seed=42, max_tokens=900))

    body = sent_json(route)
    assert body["model"] == server.model
    assert body["messages"] == MESSAGES
    schema, sampling = server.sent(body)
    assert schema == SCHEMA
    assert sampling == {"temperature": 0.3, "seed": 42, "max_tokens": 900}


async def test_absent_seed_is_not_sent(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    route = answering(api, server)

    await backend.complete(make_request(seed=None))

    assert "seed" not in server.sent(sent_json(route))[1]


async def test_reply_becomes_completion(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    route = answering(api, server)

    completion = await backend.complete(make_request())

    assert route.call_count == 1
    assert completion.text == REPLY
    assert completion.model == server.model
    assert completion.fingerprint == server.fingerprint
    assert completion.prompt_tokens == 812
    assert completion.completion_tokens == 143
    assert completion.response_format == "json_schema"


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "llama runner process has terminated", JudgeUnavailable),
        (500, "Internal Server Error", JudgeUnavailable),
        (503, "server busy", JudgeUnavailable),
        # a gateway's "took too long" is the judge being slow, not the prompt not fitting
        (503, "upstream request took too long", JudgeUnavailable),
        (504, "the model took too long to answer", JudgeUnavailable),
        (500, "processing took too long, try later", JudgeUnavailable),
        (500, "the prompt is too long", ContextOverflow),
        (401, "unauthorized", JudgeAuthError),
        (401, "Incorrect API key provided", JudgeAuthError),
        (403, "forbidden", JudgeAuthError),
        (404, 'model "qwen3:8b" not found, try pulling it first', JudgeRejected),
        (404, "The model `gpt-9` does not exist", JudgeRejected),
        (400, "invalid format: expected object", JudgeRejected),
        (422, "Unprocessable", JudgeRejected),
        # a server or gateway that timed the request out; the OpenAI API's lock timeout
        (408, "request timed out", JudgeTimeout),
        (409, "the server had an error while processing your request", JudgeTimeout),
        (400, "input length exceeds maximum context length", ContextOverflow),
        (400, "the prompt is too long", ContextOverflow),
        (
            400,
            "This model's maximum context length is 4096 tokens. However, you "
            "requested 5000 tokens. Please reduce the length of the messages.",
            ContextOverflow,
        ),
        (400, "the request exceeds the available context size, try increasing it", ContextOverflow),
        # Hugging Face TGI (it was judge_rejected); vLLM
        (
            422,
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. "
            "Given: 3900 `inputs` tokens and 1536 `max_new_tokens`",
            ContextOverflow,
        ),
        (422, "Input validation error: `inputs` must have less than 4096 tokens", ContextOverflow),
        (400, "The prompt (5000 tokens) is longer than the maximum model length", ContextOverflow),
    ],
)
async def test_error_statuses_are_mapped(
    api: respx.MockRouter,
    server: Server,
    backend: JudgeBackend,
    status: int,
    message: str,
    expected: type[JudgeCallError],
) -> None:
    route = api.post(server.chat_path).mock(return_value=server.error(status, message, None))

    with pytest.raises(expected) as caught:
        await backend.complete(make_request())

    assert type(caught.value) is expected
    assert caught.value.status_code == status
    assert caught.value.__cause__ is not None
    assert route.call_count == 1  # one request per attempt, whatever the status


@pytest.mark.parametrize(
    ("header", "seconds"), [("0", 0.0), ("7", 7.0), ("12", 12.0), (None, None)]
)
async def test_429_is_rate_limited_with_retry_after(
    api: respx.MockRouter,
    server: Server,
    backend: JudgeBackend,
    header: str | None,
    seconds: float | None,
) -> None:
    headers = {"Retry-After": header} if header is not None else None
    route = api.post(server.chat_path).mock(
        return_value=server.error(429, "Rate limit reached", headers)
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
    ("headers", "seconds"),
    [
        ({"Retry-After": "1e12"}, MAX_RETRY_AFTER),  # the year 33000
        ({"Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, MAX_RETRY_AFTER),
        ({"retry-after-ms": "1e15"}, MAX_RETRY_AFTER),
        ({"Retry-After": "1e400"}, None),  # read as infinity
        ({"Retry-After": "nan"}, None),
        ({"Retry-After": "-inf"}, None),
        ({"Retry-After": "Fri, 31 Dec 99999999999999999999 23:59:59 GMT"}, None),
        ({"retry-after-ms": "1e400", "Retry-After": "7"}, 7.0),
    ],
)
def test_a_retry_after_is_a_finite_wait_of_at_most_a_day(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert MAX_RETRY_AFTER == 86400
    assert parse_retry_after(httpx.Headers(headers)) == seconds


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
    api: respx.MockRouter,
    server: Server,
    backend: JudgeBackend,
    failure: Exception,
    expected: type[JudgeCallError],
) -> None:
    route = api.post(server.chat_path).mock(side_effect=failure)

    with pytest.raises(expected) as caught:
        await backend.complete(make_request())

    assert type(caught.value) is expected
    assert caught.value.__cause__ is not None
    assert route.call_count == 1


async def test_retry_after_429_then_success(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    server.extra_routes(api)
    route = api.post(server.chat_path).mock(
        side_effect=[server.error(429, "slow down", {"Retry-After": "0"}), server.reply()]
    )

    completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)

    assert completion.text == REPLY
    assert route.call_count == 2
    assert [a.outcome for a in attempts] == ["judge_rate_limited", "ok"]
    assert attempts[0].retry_after == 0.0


async def test_a_503_with_retry_after_is_waited_for(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    server.extra_routes(api)
    route = api.post(server.chat_path).mock(
        side_effect=[server.error(503, "loading model", {"Retry-After": "0.1"}), server.reply()]
    )

    started = time.monotonic()
    completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)

    assert completion.text == REPLY and route.call_count == 2
    assert [a.outcome for a in attempts] == ["judge_unavailable", "ok"]
    assert attempts[0].retry_after == 0.1
    assert time.monotonic() - started >= 0.1  # FAST alone waits at most 0.05 s


async def test_a_reply_nested_past_what_python_reads_is_unavailable_not_a_crash(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    media = "application/json" if server.name == "openai" else "application/x-ndjson"
    answer = httpx.Response(200, content=deep, headers={"Content-Type": media})
    api.post(server.chat_path).mock(return_value=answer)

    with pytest.raises(JudgeUnavailable, match="unreadable"):
        await backend.complete(make_request())


@pytest.mark.parametrize("broken", ["whole", "after-it-began"])
async def test_a_reply_that_does_not_decode_is_an_unavailable_judge(
    api: respx.MockRouter, server: Server, backend: JudgeBackend, broken: str
) -> None:
    """A body whose ``Content-Encoding`` does not decode (a broken proxy's gzip), from its
    start or once the reply has begun: an unreadable reply, retried as any unavailable
    judge, never an exception let through."""
    if broken == "whole":
        answer = undecodable_gzip(server.stream_media)
    else:
        answer = gzip_broken_after(server.stream_start, server.stream_media)
    api.post(server.chat_path).mock(return_value=answer)

    with pytest.raises(JudgeUnavailable):
        await backend.complete(make_request())


@pytest.mark.parametrize("answer", [latin1_page, undecodable_gzip], ids=["latin1-page", "bad-gzip"])
async def test_a_server_that_answers_no_readable_listing_does_not_answer(
    api: respx.MockRouter, server: Server, backend: JudgeBackend, answer: Any
) -> None:
    """A probe of a server that lists no models (a web page in Latin-1 where the API was
    expected, a body that does not decode) says the judge is unavailable: ``/readyz``
    and ``serve`` report ``judge_unavailable``, never an error of their own."""
    api.get(server.listing_path).mock(return_value=answer())

    with pytest.raises(JudgeUnavailable):
        await backend.probe()


async def test_auth_error_is_not_retried(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    route = api.post(server.chat_path).mock(return_value=server.error(401, "bad key", None))

    with pytest.raises(JudgeAuthError) as caught:
        await complete_with_retries(backend, make_request(), policy=FAST)

    assert route.call_count == 1
    assert len(caught.value.attempts) == 1


@pytest.mark.parametrize("status", [408, 409])
async def test_a_request_timed_out_on_the_way_is_retried(
    api: respx.MockRouter, server: Server, backend: JudgeBackend, status: int
) -> None:
    """A 408 Request Timeout (a server or gateway that gave up waiting) and a 409 (the
    OpenAI API's lock timeout) are timeouts: asked again, and a grading they end stays
    pending to be tried later, never unscored for one transient failure."""
    server.extra_routes(api)
    route = api.post(server.chat_path).mock(
        side_effect=[server.error(status, "request timed out", None), server.reply()]
    )

    completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)

    assert completion.text == REPLY and route.call_count == 2
    assert [(a.outcome, a.status_code) for a in attempts] == [
        ("judge_timeout", status),
        ("ok", None),
    ]
    assert JudgeTimeout.code in RETRY_LATER


async def test_server_errors_give_up_after_max_attempts(
    api: respx.MockRouter, server: Server, backend: JudgeBackend
) -> None:
    route = api.post(server.chat_path).mock(return_value=server.error(500, "runner crashed", None))

    with pytest.raises(JudgeUnavailable) as caught:
        await complete_with_retries(backend, make_request(), policy=FAST)

    assert route.call_count == FAST.max_attempts
    assert [a.status_code for a in caught.value.attempts] == [500] * FAST.max_attempts


@pytest.mark.parametrize(
    "fault",
    [AttributeError("'str' object has no attribute 'get'"), TypeError("not a mapping")],
    ids=["AttributeError", "TypeError"],
)
async def test_an_exception_a_backend_lets_through_is_an_unavailable_judge(
    fault: Exception,
) -> None:
    """A client tripping over a reply it never expected: the attempt is recorded as an
    unavailable judge naming the exception's type and retried; the call is kept."""
    _, attempts = await complete_with_retries(
        ScriptedBackend([fault, "{}"]), make_request(), policy=FAST
    )
    assert [a.outcome for a in attempts] == ["judge_unavailable", "ok"]
    assert type(fault).__name__ in (attempts[0].error or "")

    caller = JudgeCaller(ScriptedBackend([fault] * FAST.max_attempts), retry=FAST)
    call = await caller.call("grade", make_request())
    assert call.completion is None and call.error_code == "judge_unavailable"
    assert type(fault).__name__ in (call.error or "")
    assert len(call.attempts) == FAST.max_attempts


async def test_a_cancelled_call_is_cancelled_not_an_unavailable_judge() -> None:
    with pytest.raises(asyncio.CancelledError):
        await complete_with_retries(
            ScriptedBackend([asyncio.CancelledError(), "{}"]), make_request(), policy=FAST
        )
