"""Checking that quoted evidence really occurs in the diagnosis.

Both texts are normalized the way the prompt normalizes untrusted text, then
case-folded with punctuation reduced to spaces, so quotes that differ only in case,
white space or trivial punctuation still match. A quote may join passages with an
ellipsis; each passage must occur. Small copying slips are tolerated through
rapidfuzz's partial ratio; fabricated text is not.
"""

from __future__ import annotations

import re

from rapidfuzz import fuzz

from judge.prompt import normalize_untrusted

__all__ = ["MIN_QUOTE_CHARS", "quote_occurs"]

#: a passage shorter than this (after normalization) cannot back a yes
MIN_QUOTE_CHARS = 4
#: partial-ratio score (0-100) above which a passage counts as found
FUZZY_CUTOFF = 94.0

_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)
_ELLIPSIS = re.compile(r"\.{3,}|…")


def _plain(text: str) -> str:
    return _NON_WORD.sub(" ", normalize_untrusted(text).casefold()).strip()


def _passage_occurs(passage: str, haystack: str) -> bool:
    if passage in haystack:
        return True
    if len(passage) < 12:
        # short passages must match exactly on word boundaries: fuzz is too lenient there
        return False
    return fuzz.partial_ratio(passage, haystack, score_cutoff=FUZZY_CUTOFF) > 0


def quote_occurs(quote: str, diagnosis: str) -> bool:
    """Whether ``quote`` (one passage or several joined by an ellipsis) is in ``diagnosis``."""
    haystack = f" {_plain(diagnosis)} "
    passages = [_plain(p) for p in _ELLIPSIS.split(quote)]
    passages = [p for p in passages if p]
    if not passages or sum(len(p) for p in passages) < MIN_QUOTE_CHARS:
        return False
    return all(_passage_occurs(f" {p} " if len(p) < 12 else p, haystack) for p in passages)
