"""A judge behind an Ollama server, through the official ``ollama`` client.

The reply is constrained by passing the JSON schema as ``format``; the sampling
settings go in ``options`` together with a context window (``num_ctx``) large enough
for the prompt, because Ollama silently truncates prompts that overflow it. Ollama
reloads its model whenever a request's ``num_ctx`` differs from the loaded one, dropping
the cached prompt prefix, so a window the backend sizes itself is kept from call to
call while the prompts fit it (:meth:`OllamaBackend.window`).

Replies are streamed and read within :class:`StreamLimits` (first token, idle, overall);
the model's digest, looked up once after a reply (``/api/tags``), within what is left of
the overall cap, is every completion's fingerprint (so the judge is never known by a
``fingerprint:`` digest: ``judge.backends.base.DIGEST_FINGERPRINTS``). The client's
errors are translated to ``judge.errors`` in one place, :func:`map_ollama_errors`. Note
how the client surfaces failures: an HTTP error status becomes ``ollama.ResponseError``
(raised ``from None``, the original ``httpx.HTTPStatusError`` survives as
``__context__``), a refused connection becomes the builtin ``ConnectionError``, and
timeouts escape as raw ``httpx`` exceptions.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import ollama
import pydantic

from judge.backends.http import status_error, tls_context
from judge.backends.streaming import SizeLimit, StreamLimits, cut_short, paced
from judge.calls import Completion, JudgeRequest
from judge.context import CHARS_PER_TOKEN, counted_chars
from judge.errors import JudgeCallError, JudgeTimeout, JudgeUnavailable

__all__ = [
    "DIGEST_RETRY_SECONDS",
    "REPAIR_ROOM",
    "OllamaBackend",
    "estimate_num_ctx",
    "map_ollama_errors",
    "needed_tokens",
]


#: tokens a window sized for a request keeps beyond the request's own needs: what a
#: repair call adds (the rejected reply, up to ``max_tokens``, and this many for what was
#: wrong with it) and what one grading's questions differ by in length
REPAIR_ROOM = 512
#: seconds the model's digest is not looked up again after a look-up that failed or was
#: not done in time: the calls meanwhile go without it rather than each wait for it
DIGEST_RETRY_SECONDS = 60.0


def needed_tokens(request: JudgeRequest) -> int:
    """The tokens ``request`` takes: its prompt (counted as the grader estimates it,
    ``judge.context.counted_chars``), the reply's budget and 256 for the chat template."""
    chars = sum(counted_chars(message.content) for message in request.messages)
    return chars // CHARS_PER_TOKEN + request.params.max_tokens + 256


def estimate_num_ctx(request: JudgeRequest) -> int:
    """A context window sized for ``request`` as the first call of a grading: the
    request, and room for the other calls of that grading (``REPAIR_ROOM`` and a second
    reply budget: a repair call, or the retry of a reply cut at its budget with twice
    the budget).

    Rounded up to a multiple of 1024 and never below 2048.
    """
    needed = needed_tokens(request) + request.params.max_tokens + REPAIR_ROOM
    return max(2048, math.ceil(needed / 1024) * 1024)


def _from_response_error(exc: ollama.ResponseError) -> JudgeCallError:
    """The judge error of an error status; the response behind it gives Retry-After."""
    context = exc.__context__
    headers = context.response.headers if isinstance(context, httpx.HTTPStatusError) else None
    status = exc.status_code if exc.status_code > 0 else None
    return status_error(status, str(exc.error), server="ollama", headers=headers)


def _from_odd_body(exc: AttributeError | TypeError) -> JudgeCallError:
    """The judge error of a body the client could not read: an error status whose body
    is JSON but no object (``"overloaded"``, ``null``, a list) is read by its status and
    text; a stream line that is no object, or an ``error`` that is one, is unreadable.

    The client fails on such bodies while building its own error, so the error status
    it was handling is the context of what it raised.
    """
    context = exc.__context__
    if isinstance(context, httpx.HTTPStatusError):
        response = context.response
        return status_error(
            response.status_code, response.text, server="ollama", headers=response.headers
        )
    return JudgeUnavailable(f"ollama sent an unreadable reply ({type(exc).__name__})")


#: how the client fails on a body it cannot read: not JSON, too deeply nested, of another
#: shape, not UTF-8 (a web page in Latin-1 at the judge's address) or not decodable by
#: its ``Content-Encoding`` (a broken proxy's gzip)
_UNREADABLE = (
    json.JSONDecodeError,
    UnicodeDecodeError,
    httpx.DecodingError,
    pydantic.ValidationError,
    RecursionError,
)


@contextmanager
def map_ollama_errors() -> Iterator[None]:
    """Translate the ``ollama`` client's exceptions into ``judge.errors``.

    Error statuses as ``judge.backends.http.status_error`` says, timeouts ->
    JudgeTimeout, connection and transport failures and unreadable replies (a body that
    is no JSON, no UTF-8 or does not decode) -> JudgeUnavailable. The client reads bodies
    that are JSON but no object (an error body ``"overloaded"`` or ``null``, a stream
    line ``null``, an ``error`` object) with an ``AttributeError`` or ``TypeError``:
    those are its replies' faults, read here too.
    """
    try:
        yield
    except ollama.ResponseError as exc:
        raise _from_response_error(exc) from exc
    except (AttributeError, TypeError) as exc:
        raise _from_odd_body(exc) from exc
    except httpx.TimeoutException as exc:
        raise JudgeTimeout(f"ollama did not answer in time ({type(exc).__name__})") from exc
    except (httpx.TransportError, ConnectionError) as exc:
        raise JudgeUnavailable(f"cannot reach ollama ({type(exc).__name__})") from exc
    except _UNREADABLE as exc:
        raise JudgeUnavailable(f"ollama sent an unreadable reply ({type(exc).__name__})") from exc


def _has_text(part: Any) -> bool:
    """Whether ``part`` carries generated text: the reply's or, from a reasoning model
    (qwen3, deepseek-r1 with ``think``), its thinking, which comes first and may take
    minutes: the model is generating, so the first-token limit is met."""
    message = part.message
    return bool(message.content or getattr(message, "thinking", None))


def _text_size(part: Any) -> int:
    """The characters of reply text ``part`` adds."""
    return len(part.message.content or "")


def _same_model(listed: str | None, wanted: str) -> bool:
    if listed is None:
        return False
    if ":" not in wanted.rsplit("/", 1)[-1]:
        wanted = f"{wanted}:latest"
    return listed == wanted


class OllamaBackend:
    """A judge model served by Ollama (``ollama:MODEL[@BASE_URL]``)."""

    name = "ollama"

    def __init__(
        self, model: str, *, base_url: str | None = None, limits: StreamLimits | None = None
    ) -> None:
        self.model = model
        self.base_url = base_url
        #: how long a streamed reply may take (first token, between tokens, overall)
        self.limits = limits or StreamLimits()
        self._client = ollama.AsyncClient(
            host=base_url, timeout=self.limits.http_timeout(), verify=tls_context()
        )
        #: the endpoint really used, as the client read it (``OLLAMA_HOST=gpu-box`` is
        #: ``http://gpu-box:11434``); the client keeps its httpx client as ``_client``
        self.endpoint = str(self._client._client.base_url).rstrip("/")
        self._digest: str | None = None
        self._digest_known = False
        self._digest_lock = asyncio.Lock()
        #: the event loop's time before which the digest is not looked up again (a
        #: look-up failed or ran out of time)
        self._digest_retry_at = -math.inf
        #: the window last sent where the request gave none (``window``)
        self._num_ctx: int | None = None

    def window(self, request: JudgeRequest) -> int:
        """The context window (``num_ctx``) ``request`` is sent with: its own if it gives
        one (a configured window); else the one this backend sized last, while the
        request fits it and a window sized for the request alone
        (:func:`estimate_num_ctx`) would be more than half as large; else that one.

        So every call of one grading (its questions, repairs and retries of cut replies,
        which a window sized for its first call holds) and of the gradings after it goes
        out with one window, and Ollama keeps its model loaded and the shared prompt
        prefix cached; a window that grew for a long prompt is given up at the first
        prompt that would be sized at most half of it, not held in memory for good.
        """
        if request.params.num_ctx is not None:
            return request.params.num_ctx
        sized = estimate_num_ctx(request)
        kept = self._num_ctx
        if kept is None or needed_tokens(request) > kept or sized * 2 <= kept:
            self._num_ctx = kept = sized
        return kept

    def _options(self, request: JudgeRequest) -> dict[str, Any]:
        params = request.params
        options: dict[str, Any] = {
            "temperature": params.temperature,
            "seed": params.seed,
            "num_predict": params.max_tokens,
            "num_ctx": self.window(request),
        }
        return {key: value for key, value in options.items() if value is not None}

    async def complete(self, request: JudgeRequest) -> Completion:
        """Send one chat request with the reply schema as ``format``; one attempt only.

        The reply is streamed and read within the backend's limits, and no further than
        its size allows (``SizeLimit``: past it, ReplyTruncated); a stream that ends
        before its ``done`` part raises, and its text is not used. The ``done_reason``
        is kept (``length``: cut at ``num_predict``, never parsed: ``judge.retry``).
        The model's digest (the completion's fingerprint) is looked up within what is
        left of the overall cap, and is None when it cannot be.
        """
        started = asyncio.get_running_loop().time()
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
        text: list[str] = []
        last: Any = None
        size = SizeLimit.text(request.params.max_tokens, _text_size)
        with map_ollama_errors():
            parts = await self._client.chat(
                model=self.model,
                messages=messages,
                format=request.reply_schema,
                options=self._options(request),
                stream=True,
            )
            reading = paced(
                parts, self.limits, begun=_has_text, server="ollama", started=started, size=size
            )
            async for part in reading:
                text.append(part.message.content or "")
                last = part
        if last is None or not last.done:
            raise cut_short("ollama")
        total = self.limits.total
        left = None if total is None else total - (asyncio.get_running_loop().time() - started)
        return Completion(
            text="".join(text),
            model=last.model or self.model,
            fingerprint=await self.digest(within=left),
            prompt_tokens=last.prompt_eval_count,
            completion_tokens=last.eval_count,
            response_format="json_schema",
            finish_reason=getattr(last, "done_reason", None),
        )

    async def digest(self, *, within: float | None = None) -> str | None:
        """The model's digest as last asked of the server (asked once if never yet);
        ``None`` if unknown.

        ``within``: the seconds it may take, waiting for another call's look-up included
        (what is left of an attempt's overall cap; None: as long as the transport
        waits). A look-up that fails or is not done in time never fails a call: the
        digest is None for it, and is not looked up again for ``DIGEST_RETRY_SECONDS``.
        """
        loop = asyncio.get_running_loop()
        if self._digest_known or loop.time() < self._digest_retry_at:
            return self._digest
        if within is not None and within <= 0:
            return None
        try:
            async with asyncio.timeout(within), self._digest_lock:
                if not self._digest_known and loop.time() >= self._digest_retry_at:
                    try:
                        await self.model_digest()
                    finally:  # failed, or cut off by ``within``
                        if not self._digest_known:
                            self._digest_retry_at = loop.time() + DIGEST_RETRY_SECONDS
        except TimeoutError:
            return None
        return self._digest

    async def model_digest(self) -> str | None:
        """The digest of the model behind the tag, asked of the server now (``DigestAware``).

        ``/api/show`` carries no digest, so it is read from ``/api/tags``; None when the
        server cannot be asked, does not list the model, or answers with anything but a
        listing (whatever the client raises reading it: the digest never fails a call).
        """
        try:
            with map_ollama_errors():
                listing = await self._client.list()
        except Exception:  # unreachable, unreadable, or a listing that is no object
            return None
        self._digest = next(
            (m.digest for m in listing.models if _same_model(m.model, self.model)), None
        )
        self._digest_known = True
        return self._digest

    async def probe(self) -> None:
        """Check that the server answers (lists its models); raise a JudgeCallError if not."""
        with map_ollama_errors():
            await self._client.list()

    async def aclose(self) -> None:
        """Close the client's HTTP connections."""
        await self._client.close()  # type: ignore[no-untyped-call]
