"""Marking passages in a diagnosis: the judge's evidence quotes and the ground truth's
values, as plain segments a template escapes (never markup built from the text)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Mark", "Segment", "evidence_passages", "segments"]

#: the stronger kind wins where marks overlap
_PRIORITY = {"verified": 3, "unverified": 2, "grounding": 1}
_ELLIPSIS = re.compile(r"\.{3,}|…")
_MIN_CHARS = 3


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


def _spans(text: str, marks: Iterable[Mark]) -> list[tuple[int, int, Mark]]:
    found = []
    for mark in marks:
        if len(mark.needle) < _MIN_CHARS:
            continue
        for match in re.finditer(re.escape(mark.needle), text, re.IGNORECASE):
            found.append((match.start(), match.end(), mark))
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
            mark = owner[start]
            piece = text[start:i]
            result.append(Segment(piece, mark.kind, mark.label) if mark else Segment(piece))
            start = i
    return result
