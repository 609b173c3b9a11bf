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

A marker split over sentences, lines or paragraphs (``Ignore`` / ``all`` / ``previous``
/ ``instructions``, one word a line) is in none of them alone: the line, paragraph or,
last, the whole text that carries it is taken instead.

Each pass over the text takes time linear in its length, whatever it holds (runs of
unclosed tags included): screening runs at intake, on whatever a submitter sends.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterator

from judge.injection import injection_markers

__all__ = ["Span", "injected_spans"]

#: (start, end) character offsets, end exclusive
Span = tuple[int, int]

#: a fenced code block or an HTML comment, to its end (or the text's), or the opening
#: tag of an XML-like element, which ends at the first closing tag of its name after it
_FENCED = re.compile(r"(```|~~~)[\s\S]*?(?:\1|$)|<!--[\s\S]*?(?:-->|$)|<(\w++)[^<>]*+>")
_CLOSING = re.compile(r"</(\w++)\s*+>")
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


def _fenced_blocks(text: str) -> Iterator[Span]:
    """Fenced code blocks, HTML comments and XML-like elements, outermost first.

    The closing tags are found once, up front: looking for one after each opening tag
    took time quadratic in a text of unclosed tags (60 KB of ``<a>``: 15 s)."""
    closings: dict[str, list[int]] = {}
    for closing in _CLOSING.finditer(text):
        closings.setdefault(closing.group(1), []).append(closing.start())
    at = 0
    while (m := _FENCED.search(text, at)) is not None:
        if m.group(2) is None:  # a code block or a comment
            yield m.span()
            at = m.end()
            continue
        starts = closings.get(m.group(2), [])
        after = bisect_left(starts, m.end())
        if after == len(starts):  # never closed: no element
            at = m.start() + 1
            continue
        end = text.index(">", starts[after]) + 1
        yield m.start(), end
        at = end


def _blocks(text: str) -> Iterator[Span]:
    yield from _fenced_blocks(text)
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


def _overlaps(spans: tuple[Span, ...], span: Span) -> bool:
    """Whether ``span`` overlaps one of ``spans`` (sorted, disjoint)."""
    before = bisect_left(spans, (span[1],))
    return before > 0 and spans[before - 1][1] > span[0]


def _paragraph_spans(marks: _Marked, paragraph: Span, blocks: tuple[Span, ...]) -> list[Span]:
    """The spans of ``paragraph`` that carry markers, ``blocks`` being the marked blocks
    of the text (see the module's docstring)."""
    text = marks.text
    lines = list(_pieces(text, *paragraph, _LINE_BREAK))
    spans: list[Span] = []
    if len(lines) > 1:
        marked = [marks(line) for line in lines]
        if 2 * sum(marked) > len(lines):
            return [paragraph]
        # a marked heading takes the rest of its paragraph: the body of a forged record
        head = next(
            (ln for ln, m in zip(lines, marked, strict=True) if m and _heading(text, ln)), None
        )
        if head is not None:
            spans.append((head[0], paragraph[1]))
            lines = [ln for ln in lines if ln[0] < head[0]]
    for line in lines:
        sentences = [s for s in _pieces(text, *line, _SENTENCE_END) if marks(s)]
        if not sentences and not _overlaps(blocks, line) and marks(line):
            sentences = [line]  # a marker split over sentences
        spans.extend(sentences)
    if not spans and not _overlaps(blocks, paragraph) and marks(paragraph):
        spans.append(paragraph)  # a marker split over lines
    return spans


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
    whole = [span for span in _stripped(text, 0, len(text)) if marks(span)]
    if not whole:
        return ()
    blocks = _merged([block for block in _blocks(text) if marks(block)])
    spans = list(blocks)
    for paragraph in _pieces(text, 0, len(text), _PARAGRAPH_BREAK):
        spans.extend(_paragraph_spans(marks, paragraph, blocks))
    # a marker split over paragraphs: the whole text carries it
    return _merged(spans or whole)
