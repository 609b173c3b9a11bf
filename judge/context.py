"""Context limits: a prompt that would not fit the judge's context window is not sent.

Tokens are estimated conservatively from characters (:func:`counted_chars`): a token is at
least about three characters of English or code for common tokenizers, and a character
outside ASCII (Chinese, Japanese, emoji, most non-Latin text: a token a character or
more) takes at most a token per byte of its UTF-8 for any byte-level tokenizer; plus a
few tokens per message for the chat template, plus the reply's ``max_tokens``. A server
that counts exactly may still refuse a prompt near the limit; its 400 is mapped to
``ContextOverflow`` by the backends and ends the same way: ``unscored`` with reason
``context_overflow``.

When the grading's policy is ``truncate``, the diagnosis is cut (at a line or word end
where one is near) so that the prompt fits, and the cut is recorded in the grading. The
room is counted in the characters the prompt holds, as the estimate counts them:
invisible characters, which the prompt leaves out, take none.

The fit can be measured on the prompt with a stand-in ground truth of a fixed budget
(:func:`ground_truth_stand_in`) instead of the real one: then whether a diagnosis fits,
and where it is cut, depend on the diagnosis alone, so a submitter who may not see the
ground truth cannot measure its length by sending diagnoses of growing length.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from judge.calls import ChatMessage
from judge.prompt import neutralize_untrusted

__all__ = [
    "CHARS_PER_TOKEN",
    "Fit",
    "OverflowPolicy",
    "counted_chars",
    "estimate_tokens",
    "fit_diagnosis",
    "ground_truth_stand_in",
]

OverflowPolicy = Literal["unscored", "truncate"]

#: ASCII characters per token assumed by the estimate (conservative: real tokenizers do
#: more for English and code)
CHARS_PER_TOKEN = 3
#: tokens the chat template adds around each message
_PER_MESSAGE = 8
#: the shortest cut diagnosis worth grading
_MIN_KEPT = 200


def counted_chars(text: str) -> int:
    """The characters ``text`` counts as in the token estimate, ``CHARS_PER_TOKEN`` of them
    a token: an ASCII character as one, any other as ``CHARS_PER_TOKEN`` per byte of its
    UTF-8 (a token of a byte-level tokenizer holds at least one byte, so no such text
    takes more tokens than bytes; Chinese takes about one a character, or more)."""
    if text.isascii():
        return len(text)
    ascii_chars = len(text.encode("ascii", "ignore"))
    other_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    return ascii_chars + CHARS_PER_TOKEN * other_bytes


def estimate_tokens(messages: Sequence[ChatMessage], *, padding_chars: int = 0) -> int:
    """A conservative token count of a prompt: its :func:`counted_chars` / 3 plus the
    chat template.

    ``padding_chars``: characters counted beyond the messages' own (``Fit.padding_chars``).
    """
    chars = _chars(messages) + padding_chars
    return math.ceil(chars / CHARS_PER_TOKEN) + _PER_MESSAGE * len(messages)


def _chars(messages: Sequence[ChatMessage]) -> int:
    return sum(counted_chars(m.content) for m in messages)


def ground_truth_stand_in(ground_truth: str, budget: int | None) -> str | None:
    """The text a prompt's fit is measured with in place of ``ground_truth``: ``budget``
    characters, or a whole multiple of it for a ground truth the prompt holds in more;
    None without a budget (the ground truth measures itself).

    The ground truth is measured as the prompt holds it (its ``>>`` written as markers,
    its ends stripped) and as the estimate counts it (:func:`counted_chars`), so the
    stand-in never counts less than the ground truth it stands for. Every ground truth
    up to ``budget`` such characters has the same stand-in, so a fit measured with it
    does not depend on the ground truth.
    """
    if budget is None:
        return None
    held = counted_chars(neutralize_untrusted(ground_truth).strip())
    return "x" * (budget * max(1, math.ceil(held / budget)))


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
    #: characters (as :func:`counted_chars` counts them) the measured prompt has beyond
    #: ``messages`` (a stand-in ground truth longer than the real one): later checks of a
    #: conversation that starts with ``messages`` count them too, so they are decided as
    #: the fit was
    padding_chars: int = 0


def _cut_at_boundary(text: str, limit: int) -> str:
    head = text[:limit]
    for sep in ("\n", " "):
        at = head.rfind(sep)
        if at >= limit * 0.9:
            return head[:at]
    return head


def _raw_end(text: str, sent_chars: int) -> int:
    """The longest prefix of ``text`` that the prompt holds in at most ``sent_chars``
    (normalized, its angle-bracket runs and chat tokens written as markers; counted as
    :func:`counted_chars` counts them)."""
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counted_chars(neutralize_untrusted(text[:middle])) <= sent_chars:
            low = middle
        else:
            high = middle - 1
    return low


def fit_diagnosis(
    build: Callable[[str], list[ChatMessage]],
    diagnosis: str,
    *,
    window: int | None,
    max_tokens: int,
    policy: OverflowPolicy,
    measure: Callable[[str], list[ChatMessage]] | None = None,
) -> Fit:
    """The prompt ``build(diagnosis)`` if it fits ``window`` tokens with the reply.

    Otherwise, by ``policy``: an overflow explanation, or the diagnosis cut to fit.
    ``measure``: the prompt whose size decides, when not ``build``'s (the same prompt
    with a :func:`ground_truth_stand_in`).
    """
    measured = measure or build
    messages = build(diagnosis)
    if window is None:
        return Fit(messages, diagnosis)
    sized = measured(diagnosis) if measure else messages
    padding = _chars(sized) - _chars(messages)
    needed = estimate_tokens(sized) + max_tokens
    if needed <= window:
        return Fit(messages, diagnosis, padding_chars=padding)
    overflow = (
        f"the prompt needs about {needed} tokens (a token per {CHARS_PER_TOKEN} ASCII "
        f"characters and per UTF-8 byte of any other, plus {max_tokens} for the reply), "
        f"over the judge's context window of {window}"
    )
    if policy != "truncate":
        return Fit(messages, diagnosis, overflow=overflow)
    # room and cut are counted in the characters the prompt holds (invisible ones are
    # not sent, a ">>" is sent as a longer marker, a long run of them as a shorter one),
    # as the estimate counts them, then the cut is made on the diagnosis itself, whose
    # offsets screening marked
    sent = neutralize_untrusted(diagnosis)
    sent_tokens = math.ceil(counted_chars(sent) / CHARS_PER_TOKEN)
    spare_chars = (window - (needed - sent_tokens)) * CHARS_PER_TOKEN
    limit = max(0, spare_chars - CHARS_PER_TOKEN * 4)
    as_sent = sent == diagnosis and diagnosis.isascii()  # an offset is a counted character
    while True:
        end = limit if as_sent else _raw_end(diagnosis, limit)
        kept = _cut_at_boundary(diagnosis, end)
        if not kept or len(kept) < min(_MIN_KEPT, len(diagnosis)):
            return Fit(messages, diagnosis, overflow=f"{overflow}, even with the diagnosis cut")
        cut_messages = build(kept)
        cut_sized = measured(kept) if measure else cut_messages
        over = estimate_tokens(cut_sized) + max_tokens - window
        if over <= 0:
            break
        # the estimate missed (white space the fence strips off the diagnosis's ends was
        # counted as room): cut by what the prompt is over, and retry
        held = counted_chars(neutralize_untrusted(kept))
        limit = max(0, min(limit, held) - over * CHARS_PER_TOKEN)
    cut = (
        f"diagnosis cut from {len(diagnosis)} to {len(kept)} characters to fit the "
        f"judge's context window of {window} tokens"
    )
    padding = _chars(cut_sized) - _chars(cut_messages)
    return Fit(cut_messages, kept, cut=cut, padding_chars=padding)
