"""What goes to a judge and what comes back: requests, completions, attempts, calls.

These records are kept verbatim in the audit trail, so they hold the full prompt,
the raw reply, the sampling parameters that were really sent and every attempt.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Attempt",
    "ChatMessage",
    "Completion",
    "JudgeCall",
    "JudgeRequest",
    "SamplingParams",
    "TokenLogprob",
]


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


class TokenLogprob(_Frozen):
    """One generated token with its log-probability and the most likely alternatives."""

    token: str
    logprob: float
    #: (token, logprob) of the server's ``top_logprobs`` at this position
    top: tuple[tuple[str, float], ...] = ()


class Completion(_Frozen):
    """One successful answer of a judge server, as the backend read it."""

    text: str
    model: str
    #: ``system_fingerprint`` (OpenAI) or the model digest (Ollama)
    fingerprint: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
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
    error: str | None = None
    retry_after: float | None = None
    #: the reply budget this attempt asked for, where it differs from the request's
    #: (a reply cut at the budget is asked again once with a larger one)
    max_tokens: int | None = None


class JudgeCall(_Frozen):
    """A judge call as kept in the audit trail: request, reply or error, attempts."""

    purpose: Literal["grade", "repair"]
    backend: str
    model: str
    base_url: str | None = None
    request: JudgeRequest
    completion: Completion | None = None
    error_code: str | None = None
    error: str | None = None
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
