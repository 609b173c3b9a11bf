"""What goes to a judge and what comes back: requests, completions, attempts, calls.

These records are kept verbatim in the audit trail, so they hold the full prompt,
the raw reply, the sampling parameters that were really sent and every attempt.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = [
    "Attempt",
    "ChatMessage",
    "Completion",
    "JudgeCall",
    "JudgeRequest",
    "SamplingParams",
    "ServerCount",
    "ServerName",
    "ServerText",
    "TokenLogprob",
    "kept_text",
]


#: what no database keeps in text: NUL (PostgreSQL refuses it; it carries nothing, and
#: is left out) and lone surrogates (no UTF-8 for them; read as U+FFFD)
_NUL = "\x00"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
#: the longest name a server reports that is kept (its column's length)
_NAME_CHARACTERS = 256
#: the counts a server reports that are kept (an INTEGER column); others are dropped
_COUNT_LIMIT = 2**31


def kept_text(text: str) -> str:
    """Text a judge server sent, as the service keeps it: without NUL, lone surrogates
    as U+FFFD (what no database stores in text)."""
    if _NUL in text:
        text = text.replace(_NUL, "")
    return _LONE_SURROGATE.sub("\ufffd", text)


def _kept_name(text: str) -> str:
    return kept_text(text)[:_NAME_CHARACTERS]


def _kept_count(count: int | None) -> int | None:
    return count if count is None or 0 <= count < _COUNT_LIMIT else None


#: text a judge server sent (its reply, its error), as kept: without NUL, lone
#: surrogates read as U+FFFD, so every database stores what SQLite would
ServerText = Annotated[str, AfterValidator(kept_text)]
#: a name a judge server reported (the model it ran, its fingerprint), as kept: at most
#: 256 characters (llama.cpp reports the path of the file it loaded)
ServerName = Annotated[str, AfterValidator(_kept_name)]
#: a token count a judge server reported, as kept: None when no column could hold it
ServerCount = Annotated[int | None, AfterValidator(_kept_count)]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChatMessage(_Frozen):
    """One chat message of a judge prompt."""

    role: Literal["system", "user", "assistant"]
    content: str


class SamplingParams(_Frozen):
    """Decoding settings that must reach the judge server unchanged."""

    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = 0
    max_tokens: int = Field(default=1536, ge=16)
    #: Ollama's context window; ``None`` lets the backend size it from the prompt
    num_ctx: int | None = None


class JudgeRequest(_Frozen):
    """A prompt, the JSON schema the reply must follow, and the sampling settings."""

    messages: tuple[ChatMessage, ...]
    reply_schema: dict[str, Any]
    params: SamplingParams = SamplingParams()


#: one byte of a token's UTF-8 text
_Byte = Annotated[int, Field(ge=0, le=255)]


class TokenLogprob(_Frozen):
    """One generated token with its log-probability and the most likely alternatives."""

    token: str
    logprob: float
    #: (token, logprob) of the server's ``top_logprobs`` at this position
    top: tuple[tuple[str, float], ...] = ()
    #: the token's UTF-8 bytes, where the server gave them (OpenAI's ``bytes``): a
    #: character split over several tokens (an emoji) is only in them, ``token`` then
    #: being escaped text such as ``\xf0\x9f`` (``judge.confidence`` decodes them)
    bytes: tuple[_Byte, ...] | None = None


class Completion(_Frozen):
    """One successful answer of a judge server, as the backend read it."""

    text: ServerText
    model: ServerName
    #: ``system_fingerprint`` (OpenAI) or the model digest (Ollama)
    fingerprint: ServerName | None = None
    prompt_tokens: ServerCount = None
    completion_tokens: ServerCount = None
    #: which structured-output form the server accepted (``json_schema``, ``json_object``...)
    response_format: str | None = None
    #: the content tokens' log-probabilities, where the server returned them
    logprobs: tuple[TokenLogprob, ...] | None = None
    #: why the server stopped (OpenAI's ``finish_reason``, Ollama's ``done_reason``):
    #: ``stop``, or ``length`` for a reply cut at the ``max_tokens`` budget, which is
    #: never parsed (``judge.retry``); None where the server did not say
    finish_reason: str | None = None
    #: how the reply came when not from a live request: ``batch <id>`` (a batch engine's
    #: result, ``judge.batch``); None for a live reply
    via: str | None = None


class Attempt(_Frozen):
    """One try at calling the judge, successful or not."""

    number: int
    started_at: datetime
    latency_ms: float
    outcome: str  # "ok" or an error code from judge.errors
    status_code: int | None = None
    error: ServerText | None = None
    retry_after: float | None = None
    #: the reply budget this attempt asked for, where it differs from the request's
    #: (a reply cut at the budget is asked again once with a larger one)
    max_tokens: int | None = None
    #: the tokens the judge read and wrote for a reply this attempt got but did not keep
    #: (one cut at its budget); None where the server did not say, or where the reply
    #: is the call's completion (its tokens are the completion's)
    prompt_tokens: ServerCount = None
    completion_tokens: ServerCount = None
    #: the text of a reply this attempt got but did not keep as the call's completion
    #: (one cut at its budget: never parsed), as the server sent it; None otherwise (a
    #: whole reply is the completion's, and one read no further than its size limit is
    #: not kept)
    reply: ServerText | None = None


class JudgeCall(_Frozen):
    """A judge call as kept in the audit trail: request, reply or error, attempts."""

    purpose: Literal["grade", "repair"]
    backend: str
    model: str
    base_url: str | None = None
    request: JudgeRequest
    completion: Completion | None = None
    error_code: str | None = None
    error: ServerText | None = None
    attempts: tuple[Attempt, ...] = ()
    #: answered from the judge cache: no request reached the judge (``attempts`` is empty)
    cached: bool = False
    #: the judge cache key its completion is kept under (``JudgeCaller.remember``); None
    #: when it is not kept (a sampled judge, an unusable conversation, a cache hit)
    cache_key: str | None = None

    @property
    def latency_ms(self) -> float:
        """Total time spent over all attempts."""
        return sum(a.latency_ms for a in self.attempts)

    @property
    def prompt_tokens(self) -> int | None:
        """Tokens the judge read for this call: its completion's and those of the replies
        it cut at their budget; None when no reply said."""
        return _tokens(
            [a.prompt_tokens for a in self.attempts],
            self.completion.prompt_tokens if self.completion else None,
        )

    @property
    def completion_tokens(self) -> int | None:
        """Tokens the judge wrote for this call: its completion's and those of the replies
        it cut at their budget; None when no reply said."""
        return _tokens(
            [a.completion_tokens for a in self.attempts],
            self.completion.completion_tokens if self.completion else None,
        )


def _tokens(cut: list[int | None], kept: int | None) -> int | None:
    """The sum of the token counts known, or None when none is."""
    known = [n for n in (*cut, kept) if n is not None]
    return sum(known) if known else None
