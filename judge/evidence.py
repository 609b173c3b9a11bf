"""Checking that quoted evidence really occurs in the diagnosis.

Both texts are normalized the way the prompt normalizes untrusted text, then
case-folded with punctuation reduced to spaces, so quotes that differ only in case,
white space or trivial punctuation still match. A quote may join passages with an
ellipsis; each passage must occur. Small copying slips are tolerated through
rapidfuzz's partial ratio; fabricated text is not, nor a slip that changes what the
passage states (a number, a negation). A quote taken from a span that
screening marked as injected (``judge.injected_spans``) does not count:
:func:`without_spans` gives the diagnosis that quotes are checked against.

:func:`check_quote` is the one check every answer's quote goes through, whatever the
question: the same quote, diagnosis and injected spans give the same outcome, and an
outcome other than ``found`` says why (:data:`QUOTE_PROBLEMS`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Literal

from rapidfuzz import fuzz

from judge.prompt import normalize_untrusted

__all__ = [
    "INJECTED_MARKER",
    "MIN_QUOTE_CHARS",
    "QUOTE_PROBLEMS",
    "QuoteCheck",
    "check_quote",
    "quote_in",
    "quote_occurs",
    "searchable",
    "without_spans",
]

#: a passage shorter than this (after normalization) cannot back a yes
MIN_QUOTE_CHARS = 4
#: partial-ratio score (0-100) above which a passage counts as found
FUZZY_CUTOFF = 94.0

#: what an injected span becomes in the text quotes are checked against: a word no
#: passage of the diagnosis can run across
INJECTED_MARKER = "\n[injected]\n"

#: the outcome of checking one quote: found, or why it does not back a yes
QuoteCheck = Literal["found", "empty", "too_short", "not_found", "injected"]

#: why a quote that is not ``found`` does not back a yes, in an adjudicator's words
QUOTE_PROBLEMS: dict[str, str] = {
    "empty": "the judge quoted nothing from the diagnosis",
    "too_short": f"the quote is shorter than {MIN_QUOTE_CHARS} characters",
    "not_found": "the quote does not occur in the diagnosis",
    "injected": "the quote occurs only inside a passage screening flagged as injected text",
}

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
#: a number of a normalized text (a run of digits: 8080, the 512 of 512mi)
_NUMBER = re.compile(r"\d+")
#: words that turn a statement around, as a normalized text has them ("isn't" is
#: "isn t": the lone t)
_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nothing", "neither", "nor", "without", "cannot", "t"}
)
_ELLIPSIS = re.compile(r"\.{3,}|…")


def _plain(text: str) -> str:
    return _NON_WORD.sub(" ", normalize_untrusted(text).casefold()).strip()


def _passage_occurs(passage: str, haystack: str) -> bool:
    if passage in haystack:
        return True
    if len(passage) < 12:
        # short passages must match exactly on word boundaries: fuzz is too lenient there
        return False
    found = fuzz.partial_ratio_alignment(passage, haystack, score_cutoff=FUZZY_CUTOFF)
    if found is None:
        return False
    # the passage of the diagnosis it matched, widened to whole words
    start = haystack.rfind(" ", 0, found.dest_start) + 1
    end = haystack.find(" ", found.dest_end)
    return _same_facts(passage, haystack[start : end if end >= 0 else len(haystack)])


def _same_facts(passage: str, matched: str) -> bool:
    """Whether a copying slip (``passage`` close to ``matched``) keeps what it states:
    every number of the quote is a number there, and as many negations (not, never,
    n't...): "512Mi" for "256Mi", "port 8081" for "8080" or "is the root cause" for "is
    not the root cause" are another claim, not a slip."""
    if Counter(_NUMBER.findall(passage)) - Counter(_NUMBER.findall(matched)):
        return False
    return _negations(passage) == _negations(matched)


def _negations(text: str) -> int:
    return sum(word in _NEGATIONS for word in text.split())


def searchable(text: str) -> str:
    """``text`` prepared once for :func:`quote_in`: normalized, case-folded, punctuation
    reduced to spaces."""
    return f" {_plain(text)} "


def quote_occurs(quote: str, diagnosis: str) -> bool:
    """Whether ``quote`` (one passage or several joined by an ellipsis) is in ``diagnosis``."""
    return quote_in(quote, searchable(diagnosis))


def quote_in(quote: str, haystack: str) -> bool:
    """Whether ``quote`` is in a text prepared by :func:`searchable` (for many quotes)."""
    passages = [_plain(p) for p in _ELLIPSIS.split(quote)]
    passages = [p for p in passages if p]
    if not passages or sum(len(p) for p in passages) < MIN_QUOTE_CHARS:
        return False
    return all(_passage_occurs(f" {p} " if len(p) < 12 else p, haystack) for p in passages)


def _too_short(quote: str) -> bool:
    passages = [p for p in (_plain(p) for p in _ELLIPSIS.split(quote)) if p]
    return not passages or sum(len(p) for p in passages) < MIN_QUOTE_CHARS


def check_quote(quote: str, diagnosis: str, injected: Sequence[tuple[int, int]] = ()) -> QuoteCheck:
    """Whether ``quote`` backs a yes: it occurs in ``diagnosis`` outside the ``injected``
    spans (``found``), or why not (``empty``, ``too_short``, ``not_found``, ``injected``)."""
    if not quote.strip():
        return "empty"
    if _too_short(quote):
        return "too_short"
    if quote_occurs(quote, without_spans(diagnosis, injected) if injected else diagnosis):
        return "found"
    return "injected" if injected and quote_occurs(quote, diagnosis) else "not_found"


def without_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with each ``(start, end)`` span (clipped to it) replaced by a separator."""
    parts: list[str] = []
    last = 0
    for start, end in sorted(spans):
        start, end = max(start, last), min(end, len(text))
        if start >= end:
            continue
        parts.extend((text[last:start], INJECTED_MARKER))
        last = end
    parts.append(text[last:])
    return "".join(parts)
