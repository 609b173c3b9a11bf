"""Reading an OpenAI-compatible streamed chat completion into one :class:`Completion`.

Chunks carry pieces of the reply (``delta.content``) or of a refusal (``delta.refusal``,
raised as an unstreamed refusal is), their log-probabilities, and at the end a
``finish_reason`` and, with ``stream_options.include_usage``, the token usage.
A stream that ends without a ``finish_reason`` was cut: it raises, and nothing of it is
parsed; the ``finish_reason`` is kept with the completion (``length``: cut at the
budget, which ``judge.retry`` never lets reach the parser). A server that ignores
``stream`` and answers one JSON body is read as such, as is the answer to a request
that asked for no stream, within the same limits. An event that is no JSON object
(``null``, a string, a list) makes the reply unreadable: the judge is unavailable.

A reply is read no further than its :class:`SizeLimit`: its text (or refusal) as it
streams, a whole body by its bytes and then by its text; one that runs past it is cut
(``ReplyTruncated``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from openai import AsyncStream
from openai._models import construct_type
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from judge.backends.http import MAX_ERROR_TEXT
from judge.backends.openai_errors import error_in_body
from judge.backends.streaming import SizeLimit, StreamLimits, cut_short, paced
from judge.calls import Completion, TokenLogprob
from judge.errors import JudgeRejected, JudgeTimeout, JudgeUnavailable

__all__ = ["EmptyStream", "completion_of", "read_stream", "token_logprobs"]

SERVER = "openai-compatible server"


def _token_bytes(item: Any) -> tuple[int, ...] | None:
    """A token's UTF-8 bytes (``bytes``: a list of numbers 0-255), or None where the
    server gave none or something else."""
    found = getattr(item, "bytes", None)
    if not isinstance(found, list) or not all(type(b) is int and 0 <= b <= 255 for b in found):
        return None
    return tuple(found)


def token_logprobs(choice: Any) -> tuple[TokenLogprob, ...] | None:
    """The content tokens' log-probabilities of a choice, or None if the server gave none;
    each token's bytes kept where the server gave them (a character split over tokens is
    only in them)."""
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if not content:
        return None
    tokens = []
    for item in content:
        token, logprob = getattr(item, "token", None), getattr(item, "logprob", None)
        if not isinstance(token, str) or not isinstance(logprob, int | float):
            return None
        top = tuple(
            (alt.token, float(alt.logprob))
            for alt in getattr(item, "top_logprobs", None) or []
            if isinstance(getattr(alt, "token", None), str)
            and isinstance(getattr(alt, "logprob", None), int | float)
        )
        tokens.append(
            TokenLogprob(token=token, logprob=float(logprob), top=top, bytes=_token_bytes(item))
        )
    return tuple(tokens)


class EmptyStream(JudgeUnavailable):
    """The server answered 200 and then sent no chunk at all.

    llama-cpp-python does so when it fails after its headers went out, for example when
    asked for log-probabilities by a model loaded without ``logits_all`` (without a
    stream it answers 500 naming logprobs).
    """


def completion_of(response: Any, form: str, model: str, logprobs_of: Any) -> Completion:
    """The completion of a whole (non-streamed) reply; any field may be missing.

    Raises a :class:`JudgeCallError` for what is no completion: an ``error`` a gateway
    sent with a 200 (read by its code and message, as an error status is), a page that
    is no JSON (a proxy, a captive portal), a reply without choices, and a refusal
    (``message.refusal`` with no content: the model's words kept in the error).
    """
    if isinstance(response, str | bytes) or response is None:
        shown = " ".join(str(response or "")[:200].split())
        raise JudgeUnavailable(f"{SERVER} answered with no chat completion: {shown!r}")
    error = getattr(response, "error", None)
    if error is not None:
        raise error_in_body(error)
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise JudgeUnavailable(f"{SERVER} answered a chat completion without choices")
    message = getattr(choices[0], "message", None)
    refusal = getattr(message, "refusal", None)
    if refusal and not getattr(message, "content", None):
        raise _refused(str(refusal))
    usage = getattr(response, "usage", None)
    return Completion(
        text=getattr(message, "content", None) or "",
        model=getattr(response, "model", None) or model,
        fingerprint=getattr(response, "system_fingerprint", None),
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        response_format=form,
        logprobs=logprobs_of(choices[0]) if choices else None,
        finish_reason=getattr(choices[0], "finish_reason", None) if choices else None,
    )


async def _read_whole(
    stream: AsyncStream[ChatCompletionChunk],
    limits: StreamLimits,
    form: str,
    model: str,
    max_tokens: int,
    logprobs_of: Any,
    started: float | None,
) -> Completion:
    """The completion of one JSON body, read in pieces within ``limits`` (each piece
    within the idle limit, the whole within the cap) and no further than its size
    allows: its bytes, then its text."""
    pieces = paced(
        stream.response.aiter_bytes(),
        limits,
        begun=lambda piece: True,
        server=SERVER,
        started=started,
        size=SizeLimit.body(max_tokens),
    )
    raw = b"".join([piece async for piece in pieces])
    whole = construct_type(type_=ChatCompletion, value=json.loads(raw))
    completion = completion_of(whole, form, model, logprobs_of)
    text = SizeLimit.text(max_tokens, len)
    if len(completion.text) > text.most:
        raise text.too_long(SERVER)
    return completion


def _refused(words: str) -> JudgeRejected:
    """The error of a model's refusal to answer (structured outputs' ``refusal``), its
    words kept."""
    return JudgeRejected(f"the model refused to answer: {words[:MAX_ERROR_TEXT]}")


#: where OpenAI-compatible servers stream a reasoning model's thinking (llama.cpp, vLLM
#: with a reasoning parser, DeepSeek: ``reasoning_content``; OpenRouter: ``reasoning``)
_REASONING = ("reasoning_content", "reasoning")


def _begun(chunk: ChatCompletionChunk) -> bool:
    """Whether ``chunk`` carries generated text, the reply's, a refusal's or a reasoning
    model's thinking (which comes first: the model is generating, the first-token limit
    met)."""
    for choice in getattr(chunk, "choices", None) or []:
        delta = getattr(choice, "delta", None)
        if getattr(delta, "content", None) or getattr(delta, "refusal", None):
            return True
        if any(getattr(delta, name, None) for name in _REASONING):
            return True
    return False


def _text_size(chunk: ChatCompletionChunk) -> int:
    """The characters of reply text and refusal ``chunk`` adds (to the first choice, the
    one kept)."""
    for choice in (getattr(chunk, "choices", None) or [])[:1]:
        delta = getattr(choice, "delta", None)
        content, refusal = getattr(delta, "content", None), getattr(delta, "refusal", None)
        size = len(content) if isinstance(content, str) else 0
        return size + (len(refusal) if isinstance(refusal, str) else 0)
    return 0


class _Reply:
    """What the chunks said so far."""

    def __init__(self, model: str) -> None:
        self.text: list[str] = []
        #: a refusal's words (``delta.refusal``), streamed in place of the reply
        self.refusal: list[str] = []
        self.tokens: list[TokenLogprob] = []
        self.has_logprobs = False
        self.model, self.fingerprint, self.usage = model, None, None
        self.finished = False
        #: the server's ``finish_reason`` (``length``: cut at the budget)
        self.finish_reason: str | None = None
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk, logprobs_of: Any) -> None:
        self.chunks += 1
        self.model = getattr(chunk, "model", None) or self.model
        self.fingerprint = getattr(chunk, "system_fingerprint", None) or self.fingerprint
        self.usage = getattr(chunk, "usage", None) or self.usage
        for choice in (getattr(chunk, "choices", None) or [])[:1]:
            delta = getattr(choice, "delta", None)
            content, refusal = getattr(delta, "content", None), getattr(delta, "refusal", None)
            if content:
                self.text.append(content)
            if refusal:
                self.refusal.append(str(refusal))
            tokens = logprobs_of(choice)
            if tokens:
                self.has_logprobs = True
                self.tokens.extend(tokens)
            reason = getattr(choice, "finish_reason", None)
            if reason:
                self.finished, self.finish_reason = True, str(reason)


async def read_stream(
    stream: AsyncStream[ChatCompletionChunk],
    limits: StreamLimits,
    *,
    form: str,
    model: str,
    max_tokens: int,
    logprobs_of: Any,
    started: float | None = None,
    whole: bool = False,
) -> Completion:
    """The whole reply of ``stream`` within ``limits`` and the size a budget of
    ``max_tokens`` allows (:class:`SizeLimit`); raises when it was cut short.

    ``started``: the event loop's time the call began (the limits count from it).
    ``whole``: the request asked for no stream, so the body is one JSON reply whatever
    its media type says.
    """
    try:
        media = stream.response.headers.get("content-type", "")
        if whole or media.startswith("application/json"):
            return await _read_whole(stream, limits, form, model, max_tokens, logprobs_of, started)
        reply = _Reply(model)
        size = SizeLimit.text(max_tokens, _text_size)
        chunks = paced(stream, limits, begun=_begun, server=SERVER, started=started, size=size)
        async for chunk in chunks:
            if not isinstance(chunk, ChatCompletionChunk):  # an event of null, a string...
                raise JudgeUnavailable(
                    f"unreadable reply from {SERVER} (a stream event that is no JSON object)"
                )
            reply.add(chunk, logprobs_of)
    except httpx.TimeoutException as exc:
        raise JudgeTimeout(f"{SERVER} did not answer in time ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:
        raise JudgeUnavailable(f"{SERVER}'s reply broke off ({type(exc).__name__})") from exc
    # a body that is not JSON (or too deep), or JSON of another shape than a completion's,
    # or that does not decode (by its Content-Encoding: a broken proxy's gzip, or as UTF-8)
    except (ValueError, RecursionError, AttributeError, TypeError, httpx.DecodingError) as exc:
        raise JudgeUnavailable(f"unreadable reply from {SERVER} ({type(exc).__name__})") from exc
    finally:
        await stream.close()
    if reply.chunks == 0:
        raise EmptyStream(f"{SERVER} answered with an empty stream")
    if not reply.finished:
        raise cut_short(SERVER)
    if reply.refusal and not reply.text:
        raise _refused("".join(reply.refusal))
    usage = reply.usage
    return Completion(
        text="".join(reply.text),
        model=reply.model,
        fingerprint=reply.fingerprint,
        prompt_tokens=getattr(usage, "prompt_tokens", None),
        completion_tokens=getattr(usage, "completion_tokens", None),
        response_format=form,
        logprobs=tuple(reply.tokens) if reply.has_logprobs else None,
        finish_reason=reply.finish_reason,
    )
