"""Where in a diagnosis the injected text is: the spans that carry injection markers.

A judge fooled by a diagnosis copies what the injection hands it: a ready-made reply
with its quotes, a forged adjudication record, a note to the grader. Those quotes occur
in the diagnosis, so finding them there proves nothing; ``judge.results`` checks
evidence, and grounding, against the diagnosis without these spans.

A span is the smallest unit that carries a marker (``judge.injection``), looked for at
three levels:

- a structured block: a fenced code block, an HTML comment, a bracketed JSON-like
  block or an XML-like element, taken whole when it carries a marker anywhere;
- a paragraph (lines without a blank line between them) of two lines or more, taken
  whole when most of its lines carry markers, and from a marked heading (a
  short line that is not a sentence, such as ``ADJUDICATION RECORD #4411``) to its end;
- otherwise each sentence of each line that carries a marker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from judge.injection import injection_markers

__all__ = ["Span", "injected_spans"]

#: (start, end) character offsets, end exclusive
Span = tuple[int, int]

_FENCED = re.compile(
    r"(```|~~~)[\s\S]*?(?:\1|$)|<!--[\s\S]*?(?:-->|$)|<(\w+)[^<>]*>[\s\S]*?</\2\s*>"
)
_OPEN, _CLOSE = "{[", "}]"
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")
_LINE_BREAK = re.compile(r"\n")
#: the longest line that may be a heading
_HEADING_CHARS = 80


def _bracket_blocks(text: str) -> Iterator[Span]:
    """Outermost balanced ``{...}`` / ``[...]`` runs, in one pass."""
    depth, start = 0, 0
    for at, ch in enumerate(text):
        if ch in _OPEN:
            if depth == 0:
                start = at
            depth += 1
        elif ch in _CLOSE and depth:
            depth -= 1
            if depth == 0:
                yield start, at + 1


def _blocks(text: str) -> Iterator[Span]:
    yield from (m.span() for m in _FENCED.finditer(text))
    yield from _bracket_blocks(text)


def _pieces(text: str, start: int, end: int, pattern: re.Pattern[str]) -> Iterator[Span]:
    """The parts of ``text[start:end]`` between matches of ``pattern``, stripped."""
    at = start
    for m in pattern.finditer(text, start, end):
        yield from _stripped(text, at, m.start())
        at = m.end()
    yield from _stripped(text, at, end)


def _stripped(text: str, start: int, end: int) -> Iterator[Span]:
    piece = text[start:end]
    if piece.strip():
        lead = len(piece) - len(piece.lstrip())
        yield start + lead, start + len(piece.rstrip())


class _Marked:
    """Whether a span of one text carries markers, each span searched once."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._seen: dict[Span, bool] = {}

    def __call__(self, span: Span) -> bool:
        if span not in self._seen:
            self._seen[span] = bool(injection_markers(self.text[span[0] : span[1]]))
        return self._seen[span]


def _heading(text: str, line: Span) -> bool:
    """A line that opens a section or record: short, not a sentence."""
    body = text[line[0] : line[1]]
    return len(body) <= _HEADING_CHARS and not body.endswith((".", "!", "?", ";", ","))


def _paragraph_spans(marks: _Marked, paragraph: Span) -> Iterator[Span]:
    text = marks.text
    lines = list(_pieces(text, *paragraph, _LINE_BREAK))
    if len(lines) > 1:
        marked = [marks(line) for line in lines]
        if 2 * sum(marked) > len(lines):
            yield paragraph
            return
        # a marked heading takes the rest of its paragraph: the body of a forged record
        head = next(
            (ln for ln, m in zip(lines, marked, strict=True) if m and _heading(text, ln)), None
        )
        if head is not None:
            yield head[0], paragraph[1]
            lines = [ln for ln in lines if ln[0] < head[0]]
    for line in lines:
        yield from (s for s in _pieces(text, *line, _SENTENCE_END) if marks(s))


def _merged(spans: list[Span]) -> tuple[Span, ...]:
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return tuple((start, end) for start, end in merged)


def injected_spans(text: str) -> tuple[Span, ...]:
    """The spans of ``text`` that carry injection markers, sorted and disjoint."""
    marks = _Marked(text)
    if not any(marks(whole) for whole in _stripped(text, 0, len(text))):
        return ()
    spans = [block for block in _blocks(text) if marks(block)]
    for paragraph in _pieces(text, 0, len(text), _PARAGRAPH_BREAK):
        spans.extend(_paragraph_spans(marks, paragraph))
    return _merged(spans)
