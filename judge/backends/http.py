"""What the HTTP-based backends share: one reading of an error status, Retry-After, the
process's TLS context, and what the retry loop tells an attempt of the one before it.

Ollama and OpenAI-compatible servers fail alike at the HTTP level, so one function,
:func:`status_error`, turns an error status and the server's message into the
``judge.errors`` class the retry policy and the service act on. Each backend maps its
own client's exceptions (``ollama.ResponseError``, ``openai.APIStatusError``, their
transport errors) and hands the status here.

The retry loop (``judge.retry``) runs each attempt within :func:`retrying_after` the
error of the attempt before it; a backend reads it with :func:`previous_error` to ask
that request, and no other, differently (an OpenAI-compatible server's empty stream:
asked again without streaming).
"""

from __future__ import annotations

import functools
import math
import re
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

from judge.errors import (
    ContextOverflow,
    JudgeAuthError,
    JudgeCallError,
    JudgeRateLimited,
    JudgeRejected,
    JudgeTimeout,
    JudgeUnavailable,
)

__all__ = [
    "MAX_ERROR_TEXT",
    "MAX_RETRY_AFTER",
    "bounded_wait",
    "is_context_overflow",
    "parse_retry_after",
    "previous_error",
    "retrying_after",
    "status_error",
    "tls_context",
]

#: how servers say a prompt does not fit: Ollama ("input length exceeds maximum context
#: length", "the prompt is too long"), OpenAI ("maximum context length is 4096 tokens"),
#: llama.cpp ("the request exceeds the available context size"), vLLM ("too many tokens")
_CONTEXT_OVERFLOW = re.compile(
    r"context.length|maximum context|context (window|size)"
    r"|(?:prompt|input|request|message)s? (?:is |was |are )?too long|too many tokens"
    r"|exceeds? .*context"
    # Hugging Face TGI; vLLM
    r"|tokens \+ `max_new_tokens` must be <=|must have less than \d+ tokens"
    r"|longer than the maximum model length",
    re.IGNORECASE,
)
#: statuses of a server (or a gateway before it) that is busy or down: retried as such
#: whatever their message says ("upstream took too long")
_UNAVAILABLE = frozenset({502, 503, 504})
#: statuses of a request that timed out on the way or at the server: retried as a timeout.
#: 408: a server or gateway that gave up waiting. 409: what the OpenAI API answers when a
#: lock timed out on its side (its own client retries it as such); no judge server
#: answers a chat request 409 for a fault of the request's
_TIMED_OUT = frozenset({408, 409})
#: the longest piece of a server's error message kept in an error
MAX_ERROR_TEXT = 300
#: the longest wait a judge's ``Retry-After`` is taken at: a day (a judge that asks for
#: longer is asked again a day later; any date holds that)
MAX_RETRY_AFTER = 86400.0


def is_context_overflow(text: str) -> bool:
    """Whether a server's error message says the prompt does not fit its context."""
    return bool(_CONTEXT_OVERFLOW.search(text))


def status_error(
    status: int | None,
    text: str,
    *,
    server: str,
    headers: httpx.Headers | None = None,
) -> JudgeCallError:
    """The judge error of an error status (None: unknown) with the server's message.

    429 -> JudgeRateLimited (with Retry-After from ``headers``, as for 503), 401/403 ->
    JudgeAuthError, 408/409 -> JudgeTimeout, a message saying the prompt does not fit ->
    ContextOverflow, other 4xx -> JudgeRejected, 5xx and anything else -> JudgeUnavailable.
    """
    text = text[:MAX_ERROR_TEXT]
    message = f"{server} answered {status}: {text}"
    retry_after = None
    if status in (429, 503) and headers is not None:
        retry_after = parse_retry_after(headers)
    if status == 429:
        return JudgeRateLimited(message, status_code=status, retry_after=retry_after)
    if status in (401, 403):
        return JudgeAuthError(message, status_code=status)
    if status in _TIMED_OUT:
        return JudgeTimeout(message, status_code=status)
    if status not in _UNAVAILABLE and is_context_overflow(text):
        return ContextOverflow(message, status_code=status)
    if status is not None and 400 <= status < 500:
        return JudgeRejected(message, status_code=status)
    return JudgeUnavailable(message, status_code=status, retry_after=retry_after)


def parse_retry_after(headers: httpx.Headers) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date),
    at most :data:`MAX_RETRY_AFTER`; None when neither says a number of seconds (a
    value that is not finite, such as ``1e400`` or ``nan``, says none)."""
    millis = _seconds(headers.get("retry-after-ms"))
    if millis is not None:
        return bounded_wait(millis / 1000)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _seconds(value)
    if seconds is not None:
        return bounded_wait(seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, OverflowError):  # no date, or none a calendar holds
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return bounded_wait((when - datetime.now(UTC)).total_seconds())


def _seconds(value: str | None) -> float | None:
    """A header's number, or None when it has none or a number that is not finite."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) else None


def bounded_wait(seconds: float | None) -> float | None:
    """A wait a judge asked for as it is honoured and recorded: within 0 and
    :data:`MAX_RETRY_AFTER`; None for none, or for one that is not finite (not a number
    any date or JSON holds)."""
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every outbound client of this process verifies servers with:
    httpx's default (the certifi bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``), made once.

    Each new httpx client would otherwise read and parse the whole CA bundle again (about
    15 ms of CPU): for every judge backend, every Batch API client, every checkpoint sent.
    """
    return httpx.create_ssl_context()


#: the error of the previous attempt of the request under way (None: its first attempt,
#: or no retry loop): one value per attempt, set around it by the loop that makes it
_PREVIOUS_ERROR: ContextVar[JudgeCallError | None] = ContextVar("previous_error", default=None)


def previous_error() -> JudgeCallError | None:
    """The error the previous attempt of the request under way failed with; None for a
    first attempt, or a call made outside a retry loop.

    What a backend reads to ask this request differently after a refusal of its own
    making (an empty stream: asked once without streaming): it belongs to the request,
    not to the endpoint that other calls, made meanwhile, share.
    """
    return _PREVIOUS_ERROR.get()


@contextmanager
def retrying_after(error: JudgeCallError | None) -> Iterator[None]:
    """Make the attempts in this block the next one of a request whose previous attempt
    failed with ``error`` (None: a first attempt), as :func:`previous_error` tells them;
    a call with its own retry loop, made meanwhile, sees its own."""
    token = _PREVIOUS_ERROR.set(error)
    try:
        yield
    finally:
        _PREVIOUS_ERROR.reset(token)
