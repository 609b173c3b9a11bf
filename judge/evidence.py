"""Checking that quoted evidence really occurs in the diagnosis.

Both texts are neutralized the way the prompt neutralizes untrusted text (its markers
for chat tokens and angle-bracket runs then made spaces, so a quote of the judge's copy
reads as the diagnosis does), then case-folded with punctuation reduced to spaces and a
number joined to the unit word after it, so quotes that differ only in case, white
space (``256 Mi`` for ``256Mi``) or trivial punctuation still match. A quote may join
passages with an ellipsis; each passage must occur. Small copying slips are tolerated
through rapidfuzz's partial ratio; fabricated text is not, nor a slip that changes what
the passage states (a number, a negation, the start of a word). A quote taken from a
span that screening marked as injected (``judge.injected_spans``) does not count, nor
one running across such a span: quotes are checked in each stretch between spans.

:func:`check_quote` is the one check every answer's quote goes through, whatever the
question: the same quote, diagnosis and injected spans give the same outcome, and an
outcome other than ``found`` says why (:data:`QUOTE_PROBLEMS`). A grading checks all its
quotes against one :class:`DiagnosisText`, which prepares the diagnosis and each stretch
between injected spans once, so checking a quote costs time linear in the diagnosis and
the quote, however many spans screening marked.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher
from functools import cached_property
from typing import Literal

from rapidfuzz import fuzz

from judge.prompt import CHAT_TOKEN_MARKER, FENCE_MARKER, neutralize_untrusted

__all__ = [
    "INJECTED_MARKER",
    "MIN_QUOTE_CHARS",
    "QUOTE_PROBLEMS",
    "UNIT_APART",
    "DiagnosisText",
    "QuoteCheck",
    "align_whole",
    "check_quote",
    "keeps_the_facts",
    "quote_in",
    "quote_occurs",
    "searchable",
    "without_spans",
]

#: a passage shorter than this (after normalization) cannot back a yes
MIN_QUOTE_CHARS = 4
#: partial-ratio score (0-100) above which a passage counts as found
FUZZY_CUTOFF = 94.0

#: what an injected span becomes in the text grounding reads (quotes are checked in
#: each stretch between spans on its own, so none runs across one)
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
#: a quantity of a normalized text: a run of digits with the letters right after it, its
#: unit (8080, 512mi, 30ms): "512Gi" for "512Mi" or "30ms" for "30s" is another quantity
_QUANTITY = re.compile(r"\d+[^\W\d_]*")
#: a space between a number and its unit word, in a normalized text ("256 mi", "30 ms",
#: "2 cores"): white space, so "256 Mi" is quoted as "256Mi" and back
UNIT_APART = re.compile(
    r"(\d) (?=(?:[kmgtpe]i?b?|[num]s|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?"
    r"|millicores?|cores?|v?cpus?)(?![^\W_]))"
)
#: what the prompt writes in the judge's copy of a text for an angle-bracket run or a
#: chat-template token: both texts are neutralized as the prompt does, these made spaces
_PROMPT_MARKERS = re.compile(f"{re.escape(FENCE_MARKER)}|{re.escape(CHAT_TOKEN_MARKER)}")
#: words that turn a statement around, as a normalized text has them ("isn't" is
#: "isn t": the lone t)
_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nothing", "neither", "nor", "without", "cannot", "t"}
)
_ELLIPSIS = re.compile(r"\.{3,}|…")


def _plain(text: str) -> str:
    """``text`` as the judge's copy has it (chat tokens and angle-bracket runs made
    markers, as in the prompt), the markers then made spaces, case-folded, punctuation
    reduced to spaces and each number joined to its unit: a quote of the judge's copy
    and the diagnosis it was copied from read the same."""
    text = _PROMPT_MARKERS.sub(" ", neutralize_untrusted(text))
    return UNIT_APART.sub(r"\1", _NON_WORD.sub(" ", text.casefold()).strip())


def _passage_at(passage: str, haystack: str, start: int) -> tuple[int, int] | None:
    """Where ``passage`` first occurs in ``haystack`` from ``start`` on, on word
    boundaries (exactly, or as a copying slip that keeps its facts), or None: "8080"
    does not occur in "18080", nor "reachable" in "unreachable". The span found starts
    at the space before the passage and ends at the one after it."""
    found = haystack.find(f" {passage} ", start)
    if found >= 0:
        return found, found + len(passage) + 2
    if len(passage) < 12:
        # short passages must match exactly on word boundaries: fuzz is too lenient there
        return None
    rest = haystack[start:]
    aligned = align_whole(passage, rest)
    if aligned is None:
        return None
    # the passage of the diagnosis it matched, widened to whole words
    begin = rest.rfind(" ", 0, aligned[0]) + 1
    end = rest.find(" ", aligned[1])
    end = end if end >= 0 else len(rest)
    if not _same_facts(passage, rest[begin:end]):
        return None
    return start + begin - 1, start + end + 1


def align_whole(passage: str, text: str) -> tuple[int, int] | None:
    """Where in ``text`` rapidfuzz's partial ratio aligns the whole of ``passage`` at
    :data:`FUZZY_CUTOFF` or above, as ``(start, end)``, or None. Against a shorter text
    the partial ratio aligns that text inside the passage instead, and a quote merely
    holding it would pass: that alignment is refused."""
    aligned = fuzz.partial_ratio_alignment(passage, text, score_cutoff=FUZZY_CUTOFF)
    if aligned is None or aligned.src_end - aligned.src_start < len(passage):
        return None
    return aligned.dest_start, aligned.dest_end


def _drops_a_word_start(passage: str, matched: str) -> bool:
    """Whether, where the words of ``passage`` and ``matched`` differ (aligned word by
    word), a word there is a quoted one with more in front of it: "reachable" quoted
    from "unreachable", "able" from "unable", "8080" from "18080", wherever it stands.
    A one-letter word is left out ("isn t" for "is not" keeps its negation, counted
    apart; "pod s" for "pods" is spacing)."""
    quoted, there = passage.split(), matched.split()
    aligned = SequenceMatcher(None, quoted, there, autojunk=False)
    for tag, q_start, q_end, t_start, t_end in aligned.get_opcodes():
        if tag != "replace":
            continue
        for word in quoted[q_start:q_end]:
            if len(word) > 1 and any(
                other != word and other.endswith(word) for other in there[t_start:t_end]
            ):
                return True
    return False


def _same_facts(passage: str, matched: str) -> bool:
    """Whether a copying slip (``passage`` close to ``matched``) keeps what it states:
    every quantity of the quote (a number with its unit) is one there, none of its words
    is the end of a longer one there, and it holds as many negations (not, never, n't...):
    "512Mi" for "256Mi" or "512Gi", "port 8081" for "8080", "reachable" for
    "unreachable" or "is the root cause" for "is not the root cause" are another claim,
    not a slip."""
    if Counter(_QUANTITY.findall(passage)) - Counter(_QUANTITY.findall(matched)):
        return False
    if _drops_a_word_start(passage, matched):
        return False
    return _negations(passage) == _negations(matched)


def keeps_the_facts(quote: str, matched: str) -> bool:
    """Whether ``quote``, a copying slip of ``matched`` (the whole words of a text the
    fuzzy match aligned it with), states what ``matched`` states, as :func:`check_quote`
    judges a slip: the same quantities and negations, no word start dropped."""
    return _same_facts(_plain(quote), _plain(matched))


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
    """Whether ``quote`` is in a text prepared by :func:`searchable` (for many quotes).

    Passages joined by an ellipsis must occur in their order, and what the ellipsis
    skips must hold no negation: "is ... the root cause" does not quote "is not the
    root cause"."""
    passages = _passages(quote)
    return not _too_short_passages(passages) and _passages_in(passages, haystack)


def _passages_in(passages: Sequence[str], haystack: str) -> bool:
    """Whether the normalized ``passages`` occur in ``haystack`` (:func:`searchable`) in
    their order, with no negation in what lies between two of them."""
    position, previous_end = 0, None
    for passage in passages:
        found = _passage_at(passage, haystack, position)
        if found is None:
            return False
        if previous_end is not None and _negations(haystack[previous_end : found[0]]):
            return False
        # a match takes the spaces around it: the next one may share the last
        position = previous_end = found[1] - 1
    return True


def _passages(quote: str) -> list[str]:
    """The passages of ``quote`` (an ellipsis joins them), normalized, empty ones left out."""
    return [p for p in (_plain(p) for p in _ELLIPSIS.split(quote)) if p]


def _too_short_passages(passages: Sequence[str]) -> bool:
    """No passage, fewer than :data:`MIN_QUOTE_CHARS` in all, or none that long on its
    own: "the ... is" is two stop words that occur in nearly every diagnosis."""
    lengths = [len(p) for p in passages]
    return not lengths or sum(lengths) < MIN_QUOTE_CHARS or max(lengths) < MIN_QUOTE_CHARS


def check_quote(quote: str, diagnosis: str, injected: Sequence[tuple[int, int]] = ()) -> QuoteCheck:
    """Whether ``quote`` backs a yes: it occurs in ``diagnosis`` outside the ``injected``
    spans (``found``), or why not (``empty``, ``too_short``, ``not_found``, ``injected``).
    For many quotes of one diagnosis, :meth:`DiagnosisText.check` prepares it once."""
    return DiagnosisText(diagnosis, injected).check(quote)


class DiagnosisText:
    """A diagnosis and its injected spans prepared once for checking many quotes in it:
    the whole text and each stretch between spans are made :func:`searchable` when a
    quote first needs them, not again for each quote."""

    def __init__(self, diagnosis: str, injected: Sequence[tuple[int, int]] = ()) -> None:
        self._diagnosis = diagnosis
        self._injected = tuple(injected)

    @cached_property
    def _whole(self) -> str:
        return searchable(self._diagnosis)

    @cached_property
    def _stretches(self) -> tuple[str, ...]:
        return tuple(searchable(s) for s in _stretches(self._diagnosis, self._injected))

    def check(self, quote: str) -> QuoteCheck:
        """:func:`check_quote` of ``quote`` against this diagnosis and its spans."""
        if not quote.strip():
            return "empty"
        passages = _passages(quote)
        if _too_short_passages(passages):
            return "too_short"
        if not self._injected:
            return "found" if _passages_in(passages, self._whole) else "not_found"
        # each stretch between injected spans on its own: no quote runs across one; a
        # stretch shorter than the longest passage can hold it neither exactly nor as a
        # slip (``align_whole`` aligns the whole passage only)
        longest = max(len(p) for p in passages)
        if any(
            len(stretch) >= longest and _passages_in(passages, stretch)
            for stretch in self._stretches
        ):
            return "found"
        return "injected" if _passages_in(passages, self._whole) else "not_found"


def _stretches(text: str, spans: Sequence[tuple[int, int]]) -> list[str]:
    """The stretches of ``text`` between the ``(start, end)`` spans (clipped to it)."""
    stretches: list[str] = []
    last = 0
    for start, end in sorted(spans):
        start, end = max(start, last), min(end, len(text))
        if start >= end:
            continue
        stretches.append(text[last:start])
        last = end
    stretches.append(text[last:])
    return stretches


def without_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """``text`` with each ``(start, end)`` span (clipped to it) replaced by a separator."""
    return INJECTED_MARKER.join(_stretches(text, spans))
