"""The agent's trace: the tool calls and observations that led to a diagnosis.

A trace comes as SREGym records it, a list of steps (each an object such as ``{"tool":
..., "input": ..., "output": ...}`` or ``{"role": ..., "content": ...}``; any keys are
kept), or as free text from other harnesses. It is untrusted text like the diagnosis:
checked against the same size limit (:func:`check_trace`, the size of its JSON form),
its credentials redacted wherever they occur (:func:`redact_trace`), never shown as
markup, and never shown to a judge.

:func:`trace_check` is the check in code "the evidence the diagnosis cites appears in
the trace": whether an answer's quote occurs in the trace the way the evidence check
finds quotes in the diagnosis (:mod:`judge.evidence`). It informs an adjudicator; it
changes no answer and no verdict.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from judge.errors import InputError
from judge.evidence import quote_in, searchable
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, check_text
from judge.prompt import normalize_untrusted
from judge.secrets import is_candidate, redact

__all__ = [
    "Trace",
    "TraceCheck",
    "TraceText",
    "check_trace",
    "redact_trace",
    "step_text",
    "trace_check",
    "trace_text",
]

#: a trace: free text, or a list of steps (JSON objects)
Trace = str | list[dict[str, Any]]
#: an answer's quote in the trace: found, not found, or there is no trace to look in
TraceCheck = Literal["found", "not_found", "no_trace"]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def step_text(value: Any) -> str:
    """One field of a step as text: a string as it is, anything else as compact JSON."""
    return value if isinstance(value, str) else _json(value)


def trace_text(trace: Trace) -> str:
    """The trace as one text to look for quotes in: free text as it is; each step's
    field values (not their keys), one per line, steps apart by a blank line."""
    if isinstance(trace, str):
        return trace
    return "\n\n".join("\n".join(step_text(v) for v in step.values()) for step in trace)


def check_trace(
    trace: Trace, *, field: str = "trace", max_bytes: int = DEFAULT_MAX_TEXT_BYTES
) -> None:
    """Refuse a trace whose JSON form is over ``max_bytes`` (the diagnosis' limit), or
    whose text has NUL bytes or is not valid UTF-8 (``InputError`` naming ``field``)."""
    if isinstance(trace, list):
        if not all(isinstance(step, dict) for step in trace):
            raise InputError(f"{field} must be a string or a list of objects", field=field)
        check_text(_json(trace), field=field, max_bytes=max_bytes)
    check_text(trace_text(trace), field=field, max_bytes=max_bytes)


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value).text
    if isinstance(value, list):
        return [_redacted(item) for item in value]
    if isinstance(value, dict):
        return {key: _under_key(key, item) for key, item in value.items()}
    return value


def _under_key(key: Any, value: Any) -> Any:
    """``value`` redacted; a string also as its key's value, as the step's JSON text
    reads it: ``{"DB_PASSWORD": "hunter22"}`` is a credential that ``hunter22`` alone is
    not. Read so only under a key a detector could look for (``judge.secrets.is_candidate``)."""
    own = _redacted(value)
    if not (isinstance(own, str) and isinstance(key, str) and is_candidate(key)):
        return own
    head, tail = f'"{key}": "', '"'
    keyed = redact(head + own + tail)
    if keyed.normalized:
        head = normalize_untrusted(head)
    kinds = [f.kind for f in keyed.findings if f.end > len(head)]
    if not kinds:
        return own
    if keyed.text.startswith(head) and keyed.text.endswith(tail):
        return keyed.text[len(head) : len(keyed.text) - len(tail)]
    return f"[REDACTED:{kinds[0]}]"  # a finding reached into the key or past the value


def redact_trace(trace: Trace) -> Trace:
    """``trace`` with every credential in its text (every string value of every step,
    however deep, also read with its key) replaced by ``[REDACTED:<kind>]``, as the
    diagnosis' are."""
    if isinstance(trace, str):
        return redact(trace).text
    return [_redacted(step) for step in trace]


class TraceText:
    """A trace prepared once for looking up many quotes in it."""

    def __init__(self, trace: Trace) -> None:
        self._haystack = searchable(trace_text(trace))

    def contains(self, quote: str) -> bool:
        """Whether ``quote`` (passages joined by an ellipsis each) occurs in the trace."""
        return quote_in(quote, self._haystack)


def trace_check(evidence: str, trace: TraceText | None) -> TraceCheck | None:
    """Whether the quote ``evidence`` appears in the agent's trace: ``no_trace`` without
    a trace, None where nothing is quoted, else ``found`` or ``not_found``."""
    if trace is None:
        return "no_trace"
    if not evidence.strip():
        return None
    return "found" if trace.contains(evidence) else "not_found"
