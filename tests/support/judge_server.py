"""A real HTTP judge server for tests: speaks OpenAI's chat completions and Ollama's chat.

It runs in a thread on 127.0.0.1 with a free port. Replies come from a queue of
scripted texts or a function of the request, so tests decide what the "model" says,
while the real ``openai`` and ``ollama`` clients talk to it over real sockets. A request
that asks for a stream gets one, as real servers send it: server-sent events of
``chat.completion.chunk`` for OpenAI, newline-delimited JSON parts for Ollama, the text
cut into "tokens" of four characters, paced like a model generating
(``first_token_seconds``, ``token_seconds``), and cut off after ``cut_after`` tokens
if asked (no final part: a dropped stream).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["JudgeServer", "running_judge_server", "sregym_reply"]

Reply = str | Callable[[dict[str, Any]], str]


def sregym_reply(yes_ids: set[str], *, evidence: str = "", all_ids: list[str] | None = None) -> str:
    """A reply in SREGym's format: a JSON array of nine objects."""
    ids = all_ids or [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
    items = [
        {
            "id": qid,
            "answer": "Yes" if qid in yes_ids else "No",
            "evidence": evidence if qid in yes_ids else "",
            "confidence": "High",
        }
        for qid in ids
    ]
    return "```json\n" + json.dumps(items, indent=1) + "\n```"


@dataclass
class JudgeServer:
    """State shared with the handler: scripted replies and the requests received."""

    replies: list[Reply] = field(default_factory=list)
    default: Reply | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    port: int = 0
    #: seconds each chat request takes, like a model generating
    delay: float = 0.0
    #: streamed replies: seconds before the first token, and between tokens
    first_token_seconds: float = 0.0
    token_seconds: float = 0.0
    #: streamed replies: stop after this many tokens without the final part
    cut_after: int | None = None
    #: what the server says of its model: OpenAI's ``system_fingerprint`` and Ollama's
    #: digest of every listed tag (a test changes them to play a model replaced)
    fingerprint: str = "fp_test"
    ollama_digest: str = "abc123"
    #: the tag ``/api/tags`` lists (``m:latest`` is what a client asking for ``m`` means)
    ollama_tag: str = "m"
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def openai_url(self) -> str:
        """Base URL for the openai client."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def ollama_url(self) -> str:
        """Base URL for the ollama client."""
        return f"http://127.0.0.1:{self.port}"

    def next_reply(self, body: dict[str, Any]) -> str:
        """The next scripted reply for a request body."""
        with self.lock:
            self.requests.append(body)
            reply = self.replies.pop(0) if self.replies else self.default
        if self.delay:
            time.sleep(self.delay)
        if reply is None:
            raise RuntimeError("the test judge server has no reply left")
        return reply(body) if callable(reply) else reply


def _openai_reply(body: dict[str, Any], text: str, fingerprint: str) -> dict[str, Any]:
    """An OpenAI chat completion carrying ``text``, with fixed token usage."""
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "system_fingerprint": fingerprint,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": text},
            }
        ],
        "usage": {"prompt_tokens": 500, "completion_tokens": 200, "total_tokens": 700},
    }


def _ollama_reply(body: dict[str, Any], text: str) -> dict[str, Any]:
    """An Ollama chat reply carrying ``text``, with fixed token counts."""
    return {
        "model": body.get("model", "m"),
        "created_at": "2026-11-30T00:00:00Z",
        "message": {"role": "assistant", "content": text},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 500,
        "eval_count": 200,
    }


#: characters of one streamed "token"
TOKEN_CHARS = 4


def _openai_chunks(
    body: dict[str, Any], text: str, fingerprint: str = "fp_test"
) -> Iterator[dict[str, Any]]:
    """The SSE payloads of a streamed chat completion: role, tokens, finish, usage."""
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0}
    base |= {"model": body.get("model", "m"), "system_fingerprint": fingerprint}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    yield chunk({"role": "assistant", "content": ""})
    for start in range(0, len(text), TOKEN_CHARS):
        yield chunk({"content": text[start : start + TOKEN_CHARS]})
    yield chunk({}, "stop")
    usage = {"prompt_tokens": 500, "completion_tokens": 200, "total_tokens": 700}
    yield {**base, "choices": [], "usage": usage}


def _ollama_parts(body: dict[str, Any], text: str) -> Iterator[dict[str, Any]]:
    """The NDJSON parts of a streamed Ollama chat: tokens, then the ``done`` part."""
    for start in range(0, len(text), TOKEN_CHARS):
        part = _ollama_reply(body, text[start : start + TOKEN_CHARS])
        yield {k: v for k, v in part.items() if k in ("model", "created_at", "message")} | {
            "done": False
        }
    yield _ollama_reply(body, "")


def _write_stream(
    handler: BaseHTTPRequestHandler, state: JudgeServer, parts: list[dict[str, Any]], sse: bool
) -> None:
    """Send ``parts`` as server-sent events (OpenAI) or JSON lines (Ollama), paced by
    ``state``: a wait before the first token, one between tokens, or a cut."""
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream" if sse else "application/x-ndjson")
    handler.end_headers()
    time.sleep(state.first_token_seconds)
    tokens = len(parts) - (3 if sse else 1)
    try:
        for index, part in enumerate(parts):
            if state.cut_after is not None and index > state.cut_after:
                return  # dropped: the final part never comes
            line = json.dumps(part)
            data = f"data: {line}\n\n" if sse else f"{line}\n"
            handler.wfile.write(data.encode())
            handler.wfile.flush()
            if 0 < index <= tokens:
                time.sleep(state.token_seconds)
        if sse:
            handler.wfile.write(b"data: [DONE]\n\n")
    except (BrokenPipeError, ConnectionResetError):
        return  # the client gave up on the reply (a limit it set was reached)


def _handler(state: JudgeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, payload: dict[str, Any], status: int = 200) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, parts: Iterator[dict[str, Any]], sse: bool) -> None:
            _write_stream(self, state, list(parts), sse)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            self.close_connection = bool(body.get("stream"))
            if self.path == "/v1/chat/completions":
                text = state.next_reply(body)
                if body.get("stream"):
                    self._stream(_openai_chunks(body, text, state.fingerprint), sse=True)
                else:
                    self._send(_openai_reply(body, text, state.fingerprint))
            elif self.path == "/api/chat":
                text = state.next_reply(body)
                if body.get("stream", True):
                    self._stream(_ollama_parts(body, text), sse=False)
                else:
                    self._send(_ollama_reply(body, text))
            elif self.path == "/api/show":
                self._send(
                    {"details": {"family": "test"}, "model_info": {}, "digest": "sha256:abc"}
                )
            else:
                self._send({"error": "not found"}, 404)

        def do_GET(self) -> None:
            if self.path == "/api/tags":
                tag = state.ollama_tag
                listed = {"name": tag, "model": tag, "digest": state.ollama_digest}
                self._send({"models": [listed]})
            else:
                self._send({"error": "not found"}, 404)

    return Handler


@contextmanager
def running_judge_server(
    replies: list[Reply] | None = None,
    *,
    default: Reply | None = None,
    delay: float = 0.0,
    **pacing: Any,
) -> Iterator[JudgeServer]:
    """Run a judge server on a free port for the duration of the block.

    ``pacing``: ``first_token_seconds``, ``token_seconds``, ``cut_after`` of streams.
    """
    state = JudgeServer(replies=list(replies or []), default=default, delay=delay, **pacing)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True  # a slow scripted reply must not hold up the test's end
    server.block_on_close = False
    state.port = server.server_address[1]
    # looks for shutdown every 50 ms: the default 0.5 s was the wait of every test's end
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
