"""Limits on a streamed judge reply: time to the first token, silence between tokens, an
overall cap, and how much of it is read.

A judge on a laptop CPU reads a 1,000-token prompt for tens of seconds and then writes
a few tokens a second: one total timeout either cuts it off while it is still writing or
waits forever for a server that hung. Streaming lets a call be judged by what matters:
did the first token come, and does the next one keep coming. A reply that stops early
(a dropped stream, a limit reached) raises; its partial text is never parsed.

A reply that runs far past its token budget (a server that ignores ``max_tokens``, or a
proxy answering something else at length) is not read further than :class:`SizeLimit`
allows: it is cut as a reply that stopped at its budget is (``ReplyTruncated``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import httpx

from judge.errors import JudgeTimeout, JudgeUnavailable, ReplyTruncated

__all__ = [
    "BODY_BYTES_PER_TOKEN",
    "CHARS_PER_TOKEN",
    "MIN_BODY_BYTES",
    "MIN_REPLY_CHARS",
    "SizeLimit",
    "StreamLimits",
    "answered",
    "cut_short",
    "paced",
]

T = TypeVar("T")

#: extra seconds the transport waits beyond the limits, so that the limits fire first
_SLACK = 5.0


@dataclass(frozen=True)
class StreamLimits:
    """How long a streamed reply may take, in seconds.

    The defaults let a 7B model on a CPU finish a grading: a 1,500-token prompt read at
    10 tokens/s (150 s) and a 600-token reply written at 3 tokens/s (200 s).
    """

    #: from the request to the first token of the reply (the prompt is read meanwhile)
    first_token: float = 300.0
    #: between two parts of the reply once it has begun
    idle: float = 60.0
    #: the whole call, from request to the last token; None for no cap
    total: float | None = 1800.0

    def whole_call(self) -> StreamLimits:
        """Limits of an unstreamed call: the whole reply comes at once, within the cap."""
        cap = self.total if self.total is not None else self.first_token + self.idle
        return StreamLimits(first_token=cap, idle=self.idle, total=cap)

    def http_timeout(self) -> httpx.Timeout:
        """The transport's timeouts: looser than the limits, which then speak first."""
        read = max(self.first_token, self.idle) + _SLACK
        if self.total is not None:
            read = min(read, self.total + _SLACK)
        return httpx.Timeout(connect=min(30.0, read), read=read, write=60.0, pool=None)


#: characters of reply text a token of the budget may stand for: tokens average 3 to 5
#: characters and few reach 16, so a reply longer than this many a token ran far past
#: its budget, whatever the tokenizer
CHARS_PER_TOKEN = 32
#: the least text read, for small budgets (a per-question call's): no reply within its
#: budget comes near, and this much is nothing to a worker's memory
MIN_REPLY_CHARS = 256 * 1024
#: bytes of a whole reply body (a server that ignored ``stream``) a token may stand for:
#: the body carries each token's log-probabilities too (some 400 bytes with five
#: alternatives), and escapes
BODY_BYTES_PER_TOKEN = 4 * 1024
#: the least body read, for small budgets
MIN_BODY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class SizeLimit(Generic[T]):
    """At most ``most`` ``unit`` of a reply to a budget of ``max_tokens`` tokens, each
    part of it measured by ``size``."""

    max_tokens: int
    most: int
    unit: str
    size: Callable[[T], int]

    @classmethod
    def text(cls, max_tokens: int, size: Callable[[T], int]) -> SizeLimit[T]:
        """The reply text (or refusal) read for ``max_tokens``: ``CHARS_PER_TOKEN``
        characters a token, at least ``MIN_REPLY_CHARS`` (262,144: what the default
        budget of 1536 tokens reads)."""
        most = max(max_tokens * CHARS_PER_TOKEN, MIN_REPLY_CHARS)
        return cls(max_tokens, most, "characters", size)

    @classmethod
    def body(cls, max_tokens: int) -> SizeLimit[bytes]:
        """The whole reply body read for ``max_tokens``: ``BODY_BYTES_PER_TOKEN`` bytes
        a token, at least ``MIN_BODY_BYTES`` (the default budget: 6 MiB)."""
        most = max(max_tokens * BODY_BYTES_PER_TOKEN, MIN_BODY_BYTES)
        return SizeLimit(max_tokens, most, "bytes", len)

    def too_long(self, server: str) -> ReplyTruncated:
        """The error of a reply cut once more than ``most`` of it came: cut as a reply
        that stopped at its budget is (asked again once with a larger one)."""
        return ReplyTruncated(
            f"{server}'s reply ran past {self.most:,} {self.unit}, far beyond its max_tokens "
            f"budget of {self.max_tokens}: it was read no further, and is never parsed"
        )


async def answered(
    request: Awaitable[T], limits: StreamLimits, *, server: str, started: float
) -> T:
    """``request`` (the response's headers) within the first-token limit and the cap.

    ``started`` is the event loop's time when the call began.
    """
    limit = limits.first_token
    if limits.total is not None:
        limit = min(limit, limits.total)
    left = limit - (asyncio.get_running_loop().time() - started)
    try:
        async with asyncio.timeout(max(left, 0.001)):
            return await request
    except TimeoutError:
        what = "first" if limit == limits.first_token else "total"
        raise JudgeTimeout(_late_message(server, what, limit, limits, 0)) from None


async def paced(
    parts: AsyncIterator[T],
    limits: StreamLimits,
    *,
    begun: Callable[[T], bool],
    server: str,
    started: float | None = None,
    size: SizeLimit[T] | None = None,
) -> AsyncIterator[T]:
    """Yield ``parts`` while each comes within its limit; raise JudgeTimeout otherwise,
    and ReplyTruncated once the parts run past ``size`` (None: unbounded).

    ``begun(part)`` tells whether a part carries reply text: until one does, the
    first-token limit applies (servers send an empty role chunk at once), then the idle
    limit. ``server`` names the judge in the error. ``started``: the event loop's time
    the call began (default: now), from which the first-token limit and the cap count.
    Past a limit or the size, the stream is let go at once.
    """
    loop = asyncio.get_running_loop()
    started = loop.time() if started is None else started
    received, has_begun, read = 0, False, 0
    iterator = aiter(parts)
    while True:
        if has_begun:
            limit, what = limits.idle, "idle"
        else:
            limit, what = limits.first_token - (loop.time() - started), "first"
        if limits.total is not None:
            left = limits.total - (loop.time() - started)
            if left <= 0:
                raise JudgeTimeout(_total_message(server, limits.total, received))
            if left < limit:
                limit, what = left, "total"
        try:
            async with asyncio.timeout(limit):
                part = await anext(iterator)
        except StopAsyncIteration:
            return
        except TimeoutError:
            await _close(iterator)
            raise JudgeTimeout(_late_message(server, what, limit, limits, received)) from None
        received += 1
        has_begun = has_begun or begun(part)
        if size is not None:
            read += size.size(part)
            if read > size.most:
                await _close(iterator)
                raise size.too_long(server)
        yield part


async def _close(iterator: AsyncIterator[T]) -> None:
    """Let go of an abandoned stream's connection now, not when it is collected."""
    close = getattr(iterator, "aclose", None)
    if close is not None:
        try:
            await close()
        except Exception:  # a broken stream may fail to close; it is gone anyway
            return


def _total_message(server: str, total: float, received: int) -> str:
    return f"{server} was still replying after the overall cap of {total:g} s ({received} parts)"


def _late_message(server: str, what: str, limit: float, limits: StreamLimits, received: int) -> str:
    if what == "first":
        return f"{server} sent no token within {limits.first_token:g} s (the first-token limit)"
    if what == "idle":
        return f"{server} stopped replying: no token for {limit:g} s after {received} parts"
    return _total_message(server, limits.total or limit, received)


def cut_short(server: str) -> JudgeUnavailable:
    """The error of a stream that ended before the reply said it was complete."""
    return JudgeUnavailable(f"{server}'s reply stream ended before the reply did")
