"""Marking passages in a diagnosis (the judge's evidence quotes and the ground truth's
values) and in the agent's trace (the same quotes), as plain segments a template
escapes (never markup built from the text).

The checks in code read a text normalized (:func:`judge.prompt.normalize_untrusted`:
NFKC, Unicode hyphens as ``-``): the ground truth's values, and quotes not found as
they stand, are looked for in the text so read, and marked on the text as written, each
letter whole with its accents."""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from judge.evidence import UNIT_APART, align_whole, keeps_the_facts
from judge.prompt import normalize_untrusted

__all__ = ["Mark", "Segment", "evidence_passages", "segments"]

#: the stronger kind wins where marks overlap (``traced``: a diagnosis' quote found in
#: the agent's trace, the only kind marked there)
_PRIORITY = {"verified": 4, "unverified": 3, "quoted": 2, "traced": 2, "grounding": 1}
_ELLIPSIS = re.compile(r"\.{3,}|…")
_MIN_CHARS = 3
#: kinds that mark a judge's quote (found approximately too); the rest match exactly
_EVIDENCE = frozenset({"verified", "unverified", "quoted", "traced"})
#: shorter quotes must match up to case, space and punctuation: fuzz is too lenient there
_FUZZY_MIN = 12
_WORD = re.compile(r"\w+", re.UNICODE)
#: characters the checks read as written (up to case): printable ASCII, tab, line feed
_PLAIN = re.compile(r"[\t\n\x20-\x7e]+")


@dataclass(frozen=True, slots=True)
class Mark:
    """A needle to mark wherever it occurs (case-insensitively), of a kind, with a label."""

    needle: str
    kind: str
    label: str


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of the diagnosis, marked (``kind``, ``label``) or not (``kind`` None)."""

    text: str
    kind: str | None = None
    label: str = ""


def evidence_passages(evidence: str) -> list[str]:
    """The passages of an evidence quote (several may be joined by an ellipsis)."""
    passages = (p.strip().strip("\"'“”").strip() for p in _ELLIPSIS.split(evidence))
    return [p for p in passages if len(p) >= _MIN_CHARS]


def _is_mark(char: str) -> bool:
    """Whether ``char`` is a combining mark (category M), part of the letter before it."""
    return unicodedata.category(char)[0] == "M"


def _unit_end(text: str, start: int) -> int:
    """Where the letter at ``start`` ends: after the combining marks that follow it, so
    that a decomposed ``é`` (``e`` and U+0301) is one letter."""
    end = start + 1
    while end < len(text) and _is_mark(text[end]):
        end += 1
    return end


@functools.lru_cache(maxsize=4096)
def _letter_read(letter: str) -> str:
    """One letter (with its combining marks) as the checks read it, case-folded."""
    return normalize_untrusted(letter).casefold()


def _read(text: str) -> tuple[str, list[int]]:
    """``text`` as the checks read it (normalized, case-folded, invisible characters
    dropped) and the index in ``text`` of every character. Each letter with its
    combining marks is read as one (NFKC composes a decomposed ``é``), every character
    it gives indexed at the letter's start."""
    pieces: list[str] = []
    where: list[int] = []
    i = 0
    while i < len(text):
        plain = _PLAIN.match(text, i)
        if plain:  # read as written, up to case; its last letter may take marks after it
            end = plain.end() - (plain.end() < len(text) and _is_mark(text[plain.end()]))
            if end > i:
                pieces.append(text[i:end].lower())
                where.extend(range(i, end))
                i = end
                continue
        if unicodedata.category(text[i]) == "Cf":
            i += 1
            continue
        end = _unit_end(text, i)
        read = _letter_read(text[i:end])
        pieces.append(read)
        where.extend([i] * len(read))
        i = end
    return "".join(pieces), where


def _folded(read: tuple[str, list[int]]) -> tuple[str, list[int]]:
    """A text as :func:`_read` reads it, each run of non-word characters one space and a
    number joined to its unit word as the evidence check joins it ("256 Mi" reads
    "256mi"), with the index in the text of every character kept."""
    chars: list[str] = []
    where: list[int] = []
    for piece, i in zip(*read, strict=True):
        if _WORD.match(piece):
            chars.append(piece)
            where.append(i)
        elif chars and chars[-1] != " ":
            chars.append(" ")
            where.append(i)
    # each match is a digit and the space after it: that space goes
    apart = {match.end() - 1 for match in UNIT_APART.finditer("".join(chars))}
    kept = [k for k in range(len(chars)) if k not in apart]
    return "".join(chars[k] for k in kept), [where[k] for k in kept]


def _approximate(text: str, folded: tuple[str, list[int]], needle: str) -> tuple[int, int] | None:
    """Where ``needle`` occurs in ``text`` on word boundaries, up to case, white space and
    punctuation, or (for longer quotes) with a small copying slip that keeps the facts,
    widened to whole words, as the evidence check accepts it: "reachable" is not marked
    inside "unreachable". ``folded`` is :func:`_folded` of ``text``, folded once by the
    caller for all its needles."""
    hay, where = folded
    want = _folded(_read(needle))[0].strip()
    if len(want) < _MIN_CHARS or not hay:
        return None
    # the folded text is words and single spaces, and ``want`` starts and ends a word
    start = hay.find(want)
    while start >= 0 and not _whole_words(hay, start, start + len(want)):
        start = hay.find(want, start + 1)
    if start >= 0:
        end = start + len(want)
    elif len(want) >= _FUZZY_MIN:
        # the whole quote must align: a shorter text it merely holds is not an occurrence
        aligned = align_whole(want, hay)
        if aligned is None:
            return None
        start, end = aligned
        while start < end and hay[start] == " ":
            start += 1
        while end > start and hay[end - 1] == " ":
            end -= 1
        if start == end:
            return None
        start = hay.rfind(" ", 0, start) + 1
        end = hay.find(" ", end)
        end = end if end >= 0 else len(hay)
        if not keeps_the_facts(needle, hay[start:end]):
            return None
    else:
        return None
    return where[start], _unit_end(text, where[end - 1])


def _whole_words(hay: str, start: int, end: int) -> bool:
    """Whether ``hay[start:end]`` (a folded text) begins and ends on word boundaries."""
    return (start == 0 or hay[start - 1] == " ") and (end == len(hay) or hay[end] == " ")


def _whole_word_pattern(needle: str) -> str:
    """A pattern of ``needle`` that does not match inside a longer word or number."""
    pattern = re.escape(needle)
    if _WORD.match(needle):
        pattern = rf"(?<!\w){pattern}"
    if _WORD.match(needle[-1]):
        pattern = rf"{pattern}(?!\w)"
    return pattern


def _occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    """Where ``needle`` occurs in ``text`` as it stands (up to case), not inside a longer
    word or number: "8080" is not in "18080", "reachable" not in "unreachable", "cafe"
    not in a decomposed "café" (``e`` and U+0301)."""
    spans = (m.span() for m in re.finditer(_whole_word_pattern(needle), text, re.IGNORECASE))
    return [(start, end) for start, end in spans if _unit_end(text, end - 1) == end]


def _read_occurrences(text: str, read: tuple[str, list[int]], needle: str) -> list[tuple[int, int]]:
    """Where ``needle`` occurs in ``text`` read as the checks read it (``read`` is
    :func:`_read` of ``text``), exactly otherwise, on word boundaries and whole letters:
    a value stated composed is found where the diagnosis writes it decomposed (or with
    fullwidth digits, a Unicode hyphen), "8080" still not in "18080" nor "cafe" in
    "café"."""
    hay, where = read
    want = _read(needle)[0]
    if not want:
        return []
    spans = []
    for match in re.finditer(_whole_word_pattern(want), hay):
        start, end = match.span()
        inside = (start > 0 and where[start - 1] == where[start]) or (
            end < len(hay) and where[end] == where[end - 1]
        )
        if not inside:  # begins and ends on a letter's first and last character
            spans.append((where[start], _unit_end(text, where[end - 1])))
    return spans


def _spans(text: str, marks: Iterable[Mark]) -> list[tuple[int, int, Mark]]:
    """Where each mark occurs in ``text``, in the order of ``marks``. Each distinct needle
    is searched once (several answers may cite one passage). A quote is looked for as it
    stands, then approximately; a ground truth's value in the text as the checks read
    it, exactly otherwise. ``text`` is read and folded once, when first needed: a long
    diagnosis with many quotes is not folded again for each."""
    exact_at: dict[tuple[str, bool], list[tuple[int, int]]] = {}
    near_at: dict[str, tuple[int, int] | None] = {}
    read: tuple[str, list[int]] | None = None
    folded: tuple[str, list[int]] | None = None
    found = []
    for mark in marks:
        if len(mark.needle) < _MIN_CHARS:
            continue
        quote = mark.kind in _EVIDENCE
        if (mark.needle, quote) not in exact_at:
            if quote:
                exact_at[mark.needle, quote] = _occurrences(text, mark.needle)
            else:
                read = read or _read(text)
                exact_at[mark.needle, quote] = _read_occurrences(text, read, mark.needle)
        exact = [(start, end, mark) for start, end in exact_at[mark.needle, quote]]
        if not exact and quote:
            if mark.needle not in near_at:
                if folded is None:
                    read = read or _read(text)
                    folded = _folded(read)
                near_at[mark.needle] = _approximate(text, folded, mark.needle)
            near = near_at[mark.needle]
            if near is not None:
                exact = [(*near, Mark(mark.needle, mark.kind, f"{mark.label} (approximate)"))]
        found.extend(exact)
    return found


def segments(text: str, marks: Iterable[Mark]) -> list[Segment]:
    """``text`` cut into segments; each character takes the strongest mark covering it."""
    owner: list[Mark | None] = [None] * len(text)
    for start, end, mark in _spans(text, marks):
        for i in range(start, end):
            current = owner[i]
            if current is None or _PRIORITY[mark.kind] > _PRIORITY[current.kind]:
                owner[i] = mark
    result: list[Segment] = []
    start = 0
    for i in range(1, len(text) + 1):
        if i == len(text) or owner[i] is not owner[start]:
            strongest = owner[start]
            piece = text[start:i]
            result.append(
                Segment(piece, strongest.kind, strongest.label) if strongest else Segment(piece)
            )
            start = i
    return result
