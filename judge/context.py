"""Context limits: a prompt that would not fit the judge's context window is not sent.

Tokens are estimated conservatively from characters (a token is at least about three
characters of English or code for common tokenizers), plus a few tokens per message
for the chat template, plus the reply's ``max_tokens``. A server that counts exactly
may still refuse a prompt near the limit; its 400 is mapped to ``ContextOverflow`` by
the backends and ends the same way: ``unscored`` with reason ``context_overflow``.

When the grading's policy is ``truncate``, the diagnosis is cut (at a line or word end
where one is near) so that the prompt fits, and the cut is recorded in the grading.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from judge.calls import ChatMessage

__all__ = [
    "CHARS_PER_TOKEN",
    "Fit",
    "OverflowPolicy",
    "estimate_tokens",
    "fit_diagnosis",
]

OverflowPolicy = Literal["unscored", "truncate"]

#: characters per token assumed by the estimate (conservative: real tokenizers do more)
CHARS_PER_TOKEN = 3
#: tokens the chat template adds around each message
_PER_MESSAGE = 8
#: the shortest cut diagnosis worth grading
_MIN_KEPT = 200


def estimate_tokens(messages: Sequence[ChatMessage]) -> int:
    """A conservative token count of a prompt: characters / 3 plus the chat template."""
    chars = sum(len(m.content) for m in messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + _PER_MESSAGE * len(messages)


@dataclass(frozen=True, slots=True)
class Fit:
    """The outcome of fitting a prompt into a context window."""

    messages: list[ChatMessage]
    #: the diagnosis as sent (cut when the policy is ``truncate``)
    diagnosis: str
    #: why the prompt cannot be sent, or None
    overflow: str | None = None
    #: what was cut, or None
    cut: str | None = None


def _cut_at_boundary(text: str, limit: int) -> str:
    head = text[:limit]
    for sep in ("\n", " "):
        at = head.rfind(sep)
        if at >= limit * 0.9:
            return head[:at]
    return head


def fit_diagnosis(
    build: Callable[[str], list[ChatMessage]],
    diagnosis: str,
    *,
    window: int | None,
    max_tokens: int,
    policy: OverflowPolicy,
) -> Fit:
    """The prompt ``build(diagnosis)`` if it fits ``window`` tokens with the reply.

    Otherwise, by ``policy``: an overflow explanation, or the diagnosis cut to fit.
    """
    messages = build(diagnosis)
    if window is None:
        return Fit(messages, diagnosis)
    needed = estimate_tokens(messages) + max_tokens
    if needed <= window:
        return Fit(messages, diagnosis)
    overflow = (
        f"the prompt needs about {needed} tokens (characters / {CHARS_PER_TOKEN} plus "
        f"{max_tokens} for the reply), over the judge's context window of {window}"
    )
    if policy != "truncate":
        return Fit(messages, diagnosis, overflow=overflow)
    spare_chars = (window - (needed - math.ceil(len(diagnosis) / CHARS_PER_TOKEN))) * 3
    kept = _cut_at_boundary(diagnosis, max(0, spare_chars - CHARS_PER_TOKEN * 4))
    if len(kept) < min(_MIN_KEPT, len(diagnosis)):
        return Fit(messages, diagnosis, overflow=f"{overflow}, even with the diagnosis cut")
    cut_messages = build(kept)
    if estimate_tokens(cut_messages) + max_tokens > window:  # pragma: no cover - defensive
        return Fit(messages, diagnosis, overflow=overflow)
    cut = (
        f"diagnosis cut from {len(diagnosis)} to {len(kept)} characters to fit the "
        f"judge's context window of {window} tokens"
    )
    return Fit(cut_messages, kept, cut=cut)
