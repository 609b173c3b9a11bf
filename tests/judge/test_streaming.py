"""Streamed judge replies: never cut off a judge that is still answering (issue 18, item 1).

Before, one total timeout (120 s by default) covered a whole call: a model on a CPU that
read the prompt for 20 s and then wrote 573 tokens at 13 tokens/s was cut off while still
writing. Now both backends stream, a call is bounded by the time to its first token and
the silence between tokens, with an overall cap beside; a reply that stops early is
never parsed. The real ``openai`` and ``ollama`` clients talk to a real streaming server.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
import respx

from judge.backends.base import JudgeBackend
from judge.backends.http import retrying_after
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import OpenAIBackend, StreamRefused
from judge.backends.streaming import MIN_BODY_BYTES, StreamLimits
from judge.calls import Completion, JudgeRequest
from judge.errors import (
    ContextOverflow,
    FeatureRefused,
    JudgeCallError,
    JudgeTimeout,
    JudgeUnavailable,
    ReplyTruncated,
)
from judge.retry import complete_with_retries
from tests.judge.backend_servers import FAST, OPENAI_BASE, make_request
from tests.support.judge_server import TOKEN_CHARS, JudgeServer, running_judge_server
from tests.support.paced_server import paced_server

REPLY = '{"answers": [' + ", ".join(f'"answer {i}"' for i in range(12)) + "]}"
TOKENS = -(-len(REPLY) // TOKEN_CHARS)

Build = Callable[[JudgeServer, StreamLimits], JudgeBackend]


def _openai(server: JudgeServer, limits: StreamLimits) -> JudgeBackend:
    return OpenAIBackend("m", base_url=server.openai_url, limits=limits, logprobs=False)


def _ollama(server: JudgeServer, limits: StreamLimits) -> JudgeBackend:
    return OllamaBackend("m", base_url=server.ollama_url, limits=limits)


BACKENDS = pytest.mark.parametrize("build", [_openai, _ollama], ids=["openai", "ollama"])


@BACKENDS
async def test_a_slow_steady_reply_finishes_past_what_one_timeout_allowed(build: Build) -> None:
    """About 2 s of tokens at 0.05 s each: idle 0.5 s keeps it going, no cap cuts it."""
    limits = StreamLimits(first_token=1.0, idle=0.5, total=None)
    with running_judge_server(default=REPLY, token_seconds=0.05) as server:
        backend = build(server, limits)
        try:
            started = time.monotonic()
            completion = await backend.complete(make_request())
            took = time.monotonic() - started
        finally:
            await backend.aclose()
    assert completion.text == REPLY
    assert completion.prompt_tokens == 500 and completion.completion_tokens == 200
    assert took > TOKENS * 0.05 * 0.8  # it really streamed at that pace
    assert took > limits.first_token + limits.idle  # longer than either limit allowed


@BACKENDS
async def test_a_judge_that_never_starts_hits_the_first_token_limit(build: Build) -> None:
    limits = StreamLimits(first_token=0.3, idle=5.0, total=None)
    with running_judge_server(default=REPLY, first_token_seconds=2.0) as server:
        backend = build(server, limits)
        try:
            with pytest.raises(JudgeTimeout, match="first-token limit"):
                await backend.complete(make_request())
        finally:
            await backend.aclose()


@BACKENDS
async def test_a_judge_that_stops_mid_reply_hits_the_idle_limit(build: Build) -> None:
    limits = StreamLimits(first_token=2.0, idle=0.3, total=None)
    with running_judge_server(default=REPLY, token_seconds=1.0) as server:
        backend = build(server, limits)
        try:
            with pytest.raises(JudgeTimeout, match="stopped replying"):
                await backend.complete(make_request())
        finally:
            await backend.aclose()


@BACKENDS
async def test_the_overall_cap_still_bounds_a_steady_reply(build: Build) -> None:
    limits = StreamLimits(first_token=2.0, idle=2.0, total=0.5)
    with running_judge_server(default=REPLY, token_seconds=0.1) as server:
        backend = build(server, limits)
        try:
            with pytest.raises(JudgeTimeout, match="overall cap"):
                await backend.complete(make_request())
        finally:
            await backend.aclose()


#: a whole chat completion, as a server that ignores ``stream`` answers
_WHOLE = json.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}
        ],
    }
).encode()


@pytest.mark.parametrize(
    ("limits", "said"),
    [
        (StreamLimits(first_token=0.8, idle=0.8, total=1.0), "overall cap"),
        (StreamLimits(first_token=2.0, idle=0.3, total=None), "stopped replying"),
    ],
    ids=["cap", "idle"],
)
async def test_a_whole_json_body_sent_slowly_is_held_to_the_limits(
    limits: StreamLimits, said: str
) -> None:
    """A server that ignores ``stream`` and trickles one JSON body (8 pieces, 0.4 s
    apart: 2.8 s) holds no judge slot past ``SRE_JUDGE_JUDGE_TIMEOUT``, nor past the idle
    limit between its pieces: the body is read within the limits a stream is."""
    step = len(_WHOLE) // 8 + 1
    pieces = [(0.4 if i else 0.0, _WHOLE[i : i + step]) for i in range(0, len(_WHOLE), step)]
    with paced_server(pieces, "application/json") as url:
        backend = OpenAIBackend("m", base_url=f"{url}/v1", limits=limits, logprobs=False)
        started = time.monotonic()
        try:
            with pytest.raises(JudgeTimeout, match=said):
                await backend.complete(make_request())
        finally:
            took = time.monotonic() - started
            await backend.aclose()
    assert took < 2.0, f"the call took {took:.1f} s"


@BACKENDS
async def test_a_dropped_stream_is_never_parsed(build: Build) -> None:
    """The first tokens of a valid reply arrive, then the connection ends."""
    limits = StreamLimits(first_token=2.0, idle=2.0, total=None)
    with running_judge_server(default=REPLY, cut_after=3) as server:
        backend = build(server, limits)
        try:
            with pytest.raises(JudgeUnavailable, match=r"ended before the reply did|broke off"):
                await backend.complete(make_request())
        finally:
            await backend.aclose()


def test_the_defaults_let_a_7b_model_on_a_cpu_finish() -> None:
    """1,500 prompt tokens read at 10/s, 600 reply tokens at 3/s (slower than 4/s)."""
    limits = StreamLimits()
    prompt_seconds, token_gap, reply_seconds = 1500 / 10, 1 / 3, 600 / 3
    assert limits.first_token > prompt_seconds
    assert limits.idle > 20 * token_gap  # a pause of twenty tokens' time is not silence
    assert limits.total is None or limits.total > prompt_seconds + reply_seconds


async def test_logprobs_and_usage_of_a_stream_are_gathered_from_its_chunks() -> None:
    """Confidence comes from token log-probabilities: a stream spreads them over chunks."""

    def chunk(content: str | None, logprob: float | None, finish: str | None = None) -> str:
        choice: dict[str, object] = {"index": 0, "delta": {}, "finish_reason": finish}
        if content is not None:
            choice["delta"] = {"content": content}
            top = [{"token": content, "logprob": logprob, "bytes": None}]
            item = {"token": content, "logprob": logprob, "bytes": None, "top_logprobs": top}
            choice["logprobs"] = {"content": [item]}
        body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "served"}
        return "data: " + json.dumps({**body, "choices": [choice]}) + "\n\n"

    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    final = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "served"}
    events = (
        chunk('{"a":', -0.1)
        + chunk(' "yes"}', -0.2)
        + chunk(None, None, "stop")
        + "data: "
        + json.dumps({**final, "choices": [], "usage": usage})
        + "\n\ndata: [DONE]\n\n"
    )
    with respx.mock(base_url="http://127.0.0.1:18080/v1") as api:
        api.post("/chat/completions").mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=events.encode()
            )
        )
        backend = OpenAIBackend("m", base_url="http://127.0.0.1:18080/v1")
        completion = await backend.complete(make_request())
        await backend.aclose()
    assert completion.text == '{"a": "yes"}' and completion.model == "served"
    assert completion.logprobs is not None
    assert [t.logprob for t in completion.logprobs] == [-0.1, -0.2]
    assert (completion.prompt_tokens, completion.completion_tokens) == (7, 2)


async def test_an_empty_stream_is_asked_again_unstreamed_to_learn_the_error() -> None:
    """llama-cpp-python fails after its headers (an overflowing prompt, refused logprobs):
    a 200 with no chunk. The next attempt goes once without streaming, and the plain
    answer's status says what went wrong; the call after that streams again."""
    overflow = {"error": {"message": "Requested tokens (5000) exceed context window of 4096"}}
    empty = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"")
    with respx.mock(base_url="http://127.0.0.1:18080/v1") as api:
        route = api.post("/chat/completions").mock(
            side_effect=[empty, httpx.Response(400, json=overflow), empty]
        )
        backend = OpenAIBackend("m", base_url="http://127.0.0.1:18080/v1", logprobs=False)
        with pytest.raises(ContextOverflow) as caught:
            await complete_with_retries(backend, make_request(), policy=FAST)
        attempts = caught.value.attempts
        assert [a.outcome for a in attempts] == ["feature_refused", "context_overflow"]
        bodies = [json.loads(call.request.content) for call in route.calls]
        assert [b.get("stream", False) for b in bodies] == [True, False]
        with pytest.raises(JudgeCallError):  # the next call streams again
            await backend.complete(make_request())
        assert json.loads(route.calls[-1].request.content)["stream"] is True
        await backend.aclose()


def _empty_stream_or_answer(request: httpx.Request) -> httpx.Response:
    """llama-cpp-python failing after its headers: a streamed request gets a 200 and no
    chunk; asked without streaming, it answers."""
    if json.loads(request.content).get("stream"):
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"")
    return httpx.Response(200, content=_WHOLE, headers={"content-type": "application/json"})


class _AnotherWorkerMeanwhile:
    """A backend shared by the service's workers, as one grading's retry loop sees it:
    another worker's call on the same backend comes in between each failed attempt and
    its retry (an ordinary interleaving of concurrent workers, made deterministic)."""

    def __init__(self, shared: OpenAIBackend) -> None:
        self.name, self.model, self.base_url = shared.name, shared.model, shared.base_url
        self.shared = shared
        self.others: list[str] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        try:
            return await self.shared.complete(request)
        except FeatureRefused:
            try:
                await complete_with_retries(self.shared, make_request(), policy=FAST)
                self.others.append("ok")
            except JudgeCallError as exc:
                self.others.append(exc.code)
            raise

    async def probe(self) -> None:
        await self.shared.probe()

    async def aclose(self) -> None:
        await self.shared.aclose()


async def test_the_retry_after_an_empty_stream_goes_unstreamed_whatever_other_calls_do() -> None:
    """The request that met an empty stream is the one asked again without streaming,
    however many other calls share the backend meanwhile (``SRE_JUDGE_JUDGE_CONCURRENCY``):
    each call gets its answer at its second attempt."""
    with respx.mock(base_url=OPENAI_BASE) as api:
        api.post("/chat/completions").mock(side_effect=_empty_stream_or_answer)
        shared = OpenAIBackend("m", base_url=OPENAI_BASE, logprobs=False)
        backend = _AnotherWorkerMeanwhile(shared)
        try:
            completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)
            together = await asyncio.gather(
                *(complete_with_retries(shared, make_request(), policy=FAST) for _ in range(4))
            )
        finally:
            await shared.aclose()
    assert completion.text == "{}"
    assert [a.outcome for a in attempts] == ["feature_refused", "ok"]
    assert backend.others == ["ok"]
    assert [[a.outcome for a in done] for _, done in together] == [["feature_refused", "ok"]] * 4


async def test_a_judge_whose_every_attempt_is_refused_is_away_not_refusing() -> None:
    """Streams that keep coming back empty, and each plain answer refusing another
    feature: the call ends as an unavailable judge (the grading pending, tried again
    later), never as a refused feature that would leave it unscored for good."""
    empty = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"")
    no_logprobs = httpx.Response(500, json={"error": {"message": "logprobs is not supported"}})
    no_schema = httpx.Response(400, json={"error": {"message": "json_schema is not supported"}})
    with respx.mock(base_url=OPENAI_BASE) as api:
        route = api.post("/chat/completions").mock(
            side_effect=[empty, no_logprobs, empty, no_schema]
        )
        backend = OpenAIBackend("m", base_url=OPENAI_BASE)
        try:
            with pytest.raises(JudgeUnavailable) as caught:
                await complete_with_retries(backend, make_request(), policy=FAST)
        finally:
            await backend.aclose()
    assert caught.value.code == "judge_unavailable"
    assert [a.outcome for a in caught.value.attempts] == ["feature_refused"] * 4
    assert [json.loads(c.request.content).get("stream", False) for c in route.calls] == [
        True,
        False,
        True,
        False,
    ]


@pytest.mark.slow  # a reply 6.5 s late: past what the transport waits for a stream
async def test_an_unstreamed_reply_may_take_up_to_the_overall_cap() -> None:
    """The request that goes once without streaming (after an empty stream) gets its
    whole reply at once: it is waited for up to the overall cap (30 s here), not cut by
    the transport's read timeout of a stream (the first-token limit and 5 s)."""
    limits = StreamLimits(first_token=0.3, idle=0.3, total=30.0)
    with running_judge_server(default='{"answers": []}', delay=6.5) as server:
        backend = OpenAIBackend("m", base_url=server.openai_url, limits=limits, logprobs=False)
        try:
            with retrying_after(StreamRefused("an empty stream")):
                completion = await backend.complete(make_request())
        finally:
            await backend.aclose()
        assert server.requests[0].get("stream", False) is False
    assert completion.text == '{"answers": []}'


async def test_the_transport_waits_for_an_unstreamed_reply_as_long_as_the_cap() -> None:
    """What the client's transport is told to wait: a stream's first part within the
    first-token limit, an unstreamed reply within the overall cap (each with slack)."""
    limits = StreamLimits(first_token=0.3, idle=0.3, total=30.0)
    whole = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "{}"},
                "finish_reason": "stop",
            }
        ],
    }
    empty = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"")
    with respx.mock(base_url="http://127.0.0.1:18080/v1") as api:
        route = api.post("/chat/completions").mock(
            side_effect=[empty, httpx.Response(200, json=whole)]
        )
        backend = OpenAIBackend(
            "m", base_url="http://127.0.0.1:18080/v1", limits=limits, logprobs=False
        )
        try:
            completion, _ = await complete_with_retries(backend, make_request(), policy=FAST)
        finally:
            await backend.aclose()
    assert completion.text == "{}"
    reads = [call.request.extensions["timeout"]["read"] for call in route.calls]
    assert reads == [limits.http_timeout().read, limits.whole_call().http_timeout().read]
    assert reads[1] >= limits.total


async def test_an_unstreamed_reply_is_read_no_further_than_its_size() -> None:
    """The request that goes once without streaming gets its whole reply read as a
    stream's is: no further than its size allows, a reply far past its budget cut."""
    whole = json.loads(_WHOLE)
    whole["choices"][0]["message"]["content"] = "x" * (MIN_BODY_BYTES + 1)
    with respx.mock(base_url="http://127.0.0.1:18080/v1") as api:
        route = api.post("/chat/completions").mock(return_value=httpx.Response(200, json=whole))
        backend = OpenAIBackend("m", base_url="http://127.0.0.1:18080/v1")
        try:
            with (
                retrying_after(StreamRefused("an empty stream")),
                pytest.raises(ReplyTruncated, match="bytes, far beyond"),
            ):
                await backend.complete(make_request(max_tokens=16))
        finally:
            await backend.aclose()
    assert json.loads(route.calls[0].request.content).get("stream", False) is False


def _event(delta: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return ("data: " + json.dumps({**chunk, "choices": [choice]}) + "\n\n").encode()


@dataclass
class _HeldReplyServer:
    """What the held reply's server tells the test: the reply has begun, the client let
    go of the empty stream's connection; and what the test tells it: send the rest."""

    url: str = ""
    begun: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    empty_closed: threading.Event = field(default_factory=threading.Event)


@contextmanager
def _held_reply_server() -> Iterator[_HeldReplyServer]:
    """A server whose first POST is answered with the start of REPLY, the rest held until
    ``release``; every later POST with a 200 and no event (llama-cpp-python failing
    after its headers)."""
    state = _HeldReplyServer()
    posts = itertools.count()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        held = False

        def log_message(self, *args: object) -> None:
            return

        def _chunk(self, piece: bytes) -> None:
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                if next(posts) == 0:
                    self.held = True
                    self._chunk(_event({"role": "assistant", "content": REPLY[:5]}))
                    state.begun.set()
                    state.release.wait(5.0)
                    self._chunk(_event({"content": REPLY[5:]}))
                    self._chunk(_event({}, "stop") + b"data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def finish(self) -> None:
            super().finish()
            if not self.held:
                state.empty_closed.set()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


async def test_an_empty_stream_leaves_the_replies_under_way_to_finish() -> None:
    """The service grades several submissions at once through one backend per judge
    (``SRE_JUDGE_JUDGE_CONCURRENCY``). After one call meets an empty stream, new
    requests go over new connections; a reply another call is still reading arrives
    whole, and the old connections are let go once it has."""
    limits = StreamLimits(first_token=5.0, idle=5.0, total=30.0)
    with _held_reply_server() as server:
        backend = OpenAIBackend("m", base_url=server.url, limits=limits, logprobs=False)
        try:
            reading = asyncio.create_task(backend.complete(make_request()))
            assert await asyncio.to_thread(server.begun.wait, 5.0)
            with pytest.raises(FeatureRefused):  # the empty stream
                await backend.complete(make_request())
            closed_while_reading = server.empty_closed.is_set()
            server.release.set()
            completion = await reading
            assert not closed_while_reading
            assert await asyncio.to_thread(server.empty_closed.wait, 5.0)  # before aclose
        finally:
            await backend.aclose()
    assert completion.text == REPLY


@pytest.mark.parametrize("event", ["null", '"hello"', "[1, 2]"])
async def test_a_stream_event_that_is_no_json_object_is_an_unavailable_judge(event: str) -> None:
    """A proxy or a broken server streaming ``data: null``: an unreadable reply, retried
    as an unavailable judge, never a crash reading it."""
    events = f"data: {event}\n\ndata: [DONE]\n\n".encode()
    stream = httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events)
    with respx.mock(base_url="http://127.0.0.1:18080/v1") as api:
        api.post("/chat/completions").mock(return_value=stream)
        backend = OpenAIBackend("m", base_url="http://127.0.0.1:18080/v1", api_key="sk-test")
        try:
            with pytest.raises(JudgeUnavailable, match="unreadable"):
                await backend.complete(make_request())
        finally:
            await backend.aclose()


#: a reasoning model's thinking: a part every 0.15 s for 1.5 s, past the first-token limit
THINKING = StreamLimits(first_token=0.5, idle=0.5, total=20.0)
THOUGHTS, THOUGHT_EVERY = 10, 0.15


def _ollama_thinking() -> list[tuple[float, bytes]]:
    def part(message: dict[str, str], **done: Any) -> bytes:
        line = {"model": "m", "created_at": "2025-05-01T10:00:00Z", "message": message}
        return (json.dumps({**line, "done": False, **done}) + "\n").encode()

    thinking = {"role": "assistant", "content": "", "thinking": "hmm "}
    pieces = [(THOUGHT_EVERY, part(thinking)) for _ in range(THOUGHTS)]
    end = {"done": True, "done_reason": "stop", "prompt_eval_count": 80, "eval_count": 40}
    pieces += [(0.02, part({"role": "assistant", "content": REPLY}))]
    return [*pieces, (0.02, part({"role": "assistant", "content": ""}, **end))]


def _openai_reasoning() -> list[tuple[float, bytes]]:
    def event(delta: dict[str, str], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        chunk = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
        return ("data: " + json.dumps({**chunk, "choices": [choice]}) + "\n\n").encode()

    pieces = [(THOUGHT_EVERY, event({"reasoning_content": "hmm "})) for _ in range(THOUGHTS)]
    pieces += [(0.02, event({"content": REPLY})), (0.02, event({}, "stop"))]
    return [*pieces, (0.0, b"data: [DONE]\n\n")]


@pytest.mark.parametrize("kind", ["ollama", "openai"])
async def test_a_reasoning_models_thinking_meets_the_first_token_limit(kind: str) -> None:
    """qwen3 or deepseek-r1 think for minutes before any reply text (Ollama's
    ``message.thinking``; ``delta.reasoning_content`` from llama.cpp, vLLM, DeepSeek):
    the model is generating, so the idle limit applies from the first thought. The
    first-token limit timed a reasoning judge out on every call."""
    if kind == "ollama":
        pieces, content_type = _ollama_thinking(), "application/x-ndjson"
    else:
        pieces, content_type = _openai_reasoning(), "text/event-stream"
    with paced_server(pieces, content_type) as url:
        backend: JudgeBackend
        if kind == "ollama":
            backend = OllamaBackend("m", base_url=url, limits=THINKING)
        else:
            backend = OpenAIBackend("m", base_url=f"{url}/v1", limits=THINKING, logprobs=False)
        try:
            completion = await backend.complete(make_request())
        finally:
            await backend.aclose()
    assert completion.text == REPLY
