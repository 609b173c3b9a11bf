"""The two real judge clients' servers as respx stands them in: replies, errors, bodies.

The backend contract suite (``test_backend_contract.py``) runs every check against
both; the backend-specific files use the same replies.
"""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import respx

from judge.backends.base import JudgeBackend
from judge.backends.ollama import OllamaBackend
from judge.backends.openai import OpenAIBackend
from judge.calls import Attempt, ChatMessage, Completion, JudgeRequest, SamplingParams
from judge.retry import RetryPolicy, complete_with_retries

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answers": {"type": "array"}},
    "required": ["answers"],
}
REPLY = '{"answers": []}'
FAST = RetryPolicy(initial_wait=0.01, max_wait=0.05, jitter=0)
MESSAGES = [
    {"role": "system", "content": "You grade diagnoses."},
    {"role": "user", "content": "Ground truth: disk full. Diagnosis: disk full."},
]

OLLAMA_BASE = "http://127.0.0.1:18434"
OLLAMA_MODEL = "qwen3:8b"
DIGEST = "sha256:500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41"
OPENAI_BASE = "http://127.0.0.1:18080/v1"
OPENAI_MODEL = "qwen2.5-1.5b"
FINGERPRINT = "b5123-8c2a1f"


def make_request(**params: Any) -> JudgeRequest:
    """The request every backend test sends, with these sampling settings."""
    return JudgeRequest(
        messages=tuple(ChatMessage(**m) for m in MESSAGES),
        reply_schema=SCHEMA,
        params=SamplingParams(**params),
    )


def sent_json(route: respx.Route, index: int = -1) -> dict[str, Any]:
    """The JSON body of one request a route received."""
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body


# --- Ollama -------------------------------------------------------------------------


def ollama_chat_reply(content: str = REPLY, **extra: Any) -> httpx.Response:
    """An ``/api/chat`` answer."""
    body = {
        "model": OLLAMA_MODEL,
        "created_at": "2025-05-01T10:00:00Z",
        "message": {"role": "assistant", "content": content},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 812,
        "eval_count": 143,
        **extra,
    }
    return httpx.Response(200, json=body)


def ollama_tags_reply(*models: tuple[str, str]) -> httpx.Response:
    """An ``/api/tags`` listing of (name, digest)."""
    entries = [
        {"name": name, "model": name, "digest": digest, "size": 5_200_000_000}
        for name, digest in models
    ]
    return httpx.Response(200, json={"models": entries})


def ollama_error(status: int, error: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """An Ollama error body."""
    return httpx.Response(status, json={"error": error}, headers=headers)


# --- OpenAI-compatible ----------------------------------------------------------------


def openai_completion_reply(content: str | None = REPLY, **extra: Any) -> httpx.Response:
    """A ``/chat/completions`` answer."""
    body: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_746_000_000,
        "model": OPENAI_MODEL,
        "system_fingerprint": FINGERPRINT,
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


def openai_error(
    status: int, message: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    """An OpenAI error body."""
    body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    return httpx.Response(status, json=body, headers=headers)


async def ask_with_retries(backend: JudgeBackend) -> tuple[Completion, list[str]]:
    """One call through the retry loop: the completion and each attempt's outcome."""
    completion, attempts = await complete_with_retries(backend, make_request(), policy=FAST)
    return completion, [attempt_outcome(a) for a in attempts]


def attempt_outcome(attempt: Attempt) -> str:
    """An attempt's outcome, with the HTTP status when there was one (``ok``, ``... 500``)."""
    return f"{attempt.outcome} {attempt.status_code}" if attempt.status_code else attempt.outcome


# --- bodies no client can read --------------------------------------------------------

#: a router's or web UI's page, in Latin-1, where the judge's API was asked
LATIN1_PAGE = "<html><body>Connexion réseau perdue</body></html>".encode("latin-1")


def latin1_page() -> httpx.Response:
    """A web page in Latin-1 (no UTF-8), answered with 200."""
    media = {"content-type": "text/html; charset=iso-8859-1"}
    return httpx.Response(200, content=LATIN1_PAGE, headers=media)


def undecodable_gzip(media: str = "application/json") -> httpx.Response:
    """A body that says it is gzip and is not (a broken proxy's)."""
    headers = {"content-type": media, "content-encoding": "gzip"}
    return httpx.Response(200, stream=httpx.ByteStream(b"this is not gzip"), headers=headers)


class _Parts(httpx.AsyncByteStream):
    """A body sent in parts, each after the reader asked for the one before."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            await asyncio.sleep(0)
            yield part


def gzip_broken_after(first: bytes, media: str) -> httpx.Response:
    """A gzip body whose first part decodes (``first``: the reply has begun) and whose
    rest does not (the proxy broke it)."""
    packer = zlib.compressobj(wbits=31)
    begun = packer.compress(first) + packer.flush(zlib.Z_SYNC_FLUSH)
    headers = {"content-type": media, "content-encoding": "gzip"}
    return httpx.Response(200, stream=_Parts([begun, b"no deflate block" * 8]), headers=headers)


# --- one server, either kind ----------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """How one kind of judge server is stood in for, and where a request puts things."""

    name: str
    base: str
    model: str
    chat_path: str
    #: the fingerprint a completion carries (Ollama's model digest, OpenAI's system one)
    fingerprint: str
    backend: Callable[[], JudgeBackend]
    reply: Callable[[], httpx.Response]
    error: Callable[[int, str, dict[str, str] | None], httpx.Response]
    #: routes a successful call needs besides the chat route
    extra_routes: Callable[[respx.MockRouter], None]
    #: (reply schema, sampling settings) as a request body carries them
    sent: Callable[[dict[str, Any]], tuple[Any, dict[str, Any]]]
    #: where the server lists its models (what a probe asks)
    listing_path: str
    #: the first part of a streamed reply, and the stream's media type
    stream_start: bytes
    stream_media: str


def _ollama_sent(body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    options = body["options"]
    names = {"temperature": "temperature", "seed": "seed", "num_predict": "max_tokens"}
    return body["format"], {names[k]: v for k, v in options.items() if k in names}


def _openai_sent(body: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    names = ("temperature", "seed", "max_tokens")
    return body["response_format"]["json_schema"]["schema"], {
        k: body[k] for k in names if k in body
    }


def _ollama_tags(router: respx.MockRouter) -> None:
    router.get("/api/tags").mock(return_value=ollama_tags_reply((OLLAMA_MODEL, DIGEST)))


OLLAMA = Server(
    name="ollama",
    base=OLLAMA_BASE,
    model=OLLAMA_MODEL,
    chat_path="/api/chat",
    fingerprint=DIGEST,
    backend=lambda: OllamaBackend(OLLAMA_MODEL, base_url=OLLAMA_BASE),
    reply=ollama_chat_reply,
    error=ollama_error,
    extra_routes=_ollama_tags,
    sent=_ollama_sent,
    listing_path="/api/tags",
    stream_start=(
        b'{"model": "qwen3:8b", "created_at": "2025-05-01T10:00:00Z", '
        b'"message": {"role": "assistant", "content": "{"}, "done": false}\n'
    ),
    stream_media="application/x-ndjson",
)

OPENAI = Server(
    name="openai",
    base=OPENAI_BASE,
    model=OPENAI_MODEL,
    chat_path="/chat/completions",
    fingerprint=FINGERPRINT,
    backend=lambda: OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="sk-test"),
    reply=openai_completion_reply,
    error=openai_error,
    extra_routes=lambda router: None,
    sent=_openai_sent,
    listing_path="/models",
    stream_start=(
        b'data: {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, '
        b'"model": "qwen2.5-1.5b", "choices": [{"index": 0, "delta": {"role": "assistant", '
        b'"content": "{"}, "finish_reason": null}]}\n\n'
    ),
    stream_media="text/event-stream",
)

SERVERS = (OLLAMA, OPENAI)
