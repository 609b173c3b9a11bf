"""The agent's trace as a grading's page shows it: beside the diagnosis, each step's
fields as plain segments (the template escapes them; nothing from the trace becomes
markup), with the answers' quotes marked where the trace contains them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from api.adjudication.highlight import Mark, Segment, evidence_passages, segments
from api.service.schemas import GradingPublic

__all__ = ["TraceField", "TraceStep", "TraceView", "trace_view"]

#: how a quote found in the trace is marked (``highlight``'s kind)
TRACED = "traced"
#: fields shown first, in this order, where a step has them: what was called, with
#: what, and what came back (SREGym's names and other harnesses')
_FIRST = (
    "role",
    "type",
    "tool",
    "tool_name",
    "action",
    "name",
    "input",
    "tool_input",
    "arguments",
    "args",
    "command",
    "output",
    "observation",
    "result",
    "content",
)


@dataclass(frozen=True, slots=True)
class TraceField:
    """One field of a step: its name and its value as marked text."""

    name: str
    segments: list[Segment]


@dataclass(frozen=True, slots=True)
class TraceStep:
    """One step of the trace, numbered from 1."""

    number: int
    fields: list[TraceField]


@dataclass(frozen=True, slots=True)
class TraceView:
    """The trace as shown: free text (``text``) or ``steps``, and how many of the
    answers' quotes the check in code found in it."""

    text: list[Segment] | None
    steps: list[TraceStep]
    quoted: int
    found: int


#: a value whose JSON is longer than this is shown indented, one item a line
_ONE_LINE = 80


def _shown(value: Any) -> str:
    """A field's value as text: a string as it is, anything else as JSON (on one line
    where it is short, else indented)."""
    if isinstance(value, str):
        return value
    line = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return line if len(line) <= _ONE_LINE else json.dumps(value, ensure_ascii=False, indent=2)


def _marks(grading: GradingPublic) -> list[Mark]:
    """One mark per quoted passage, labelled with every question citing it."""
    citing: dict[str, list[str]] = {}
    for a in grading.answers:
        for passage in evidence_passages(a.evidence):
            citing.setdefault(passage, []).append(a.question_id)
    return [Mark(passage, TRACED, f"quoted by {', '.join(ids)}") for passage, ids in citing.items()]


def _ordered(step: dict[str, Any]) -> list[tuple[str, Any]]:
    first = [(key, step[key]) for key in _FIRST if key in step]
    return first + [(key, value) for key, value in step.items() if key not in _FIRST]


def trace_view(grading: GradingPublic) -> TraceView | None:
    """The grading's trace as its page shows it, or None when it has none."""
    trace = grading.submission.trace
    if trace is None:
        return None
    marks = _marks(grading)
    checked = [a.trace_check for a in grading.answers if a.trace_check in ("found", "not_found")]
    counts = {"quoted": len(checked), "found": checked.count("found")}
    if isinstance(trace, str):
        return TraceView(text=segments(trace, marks), steps=[], **counts)
    steps = [
        TraceStep(
            number,
            [TraceField(str(key), segments(_shown(value), marks)) for key, value in _ordered(step)],
        )
        for number, step in enumerate(trace, start=1)
    ]
    return TraceView(text=None, steps=steps, **counts)
