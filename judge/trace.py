"""The agent's trace: the tool calls and observations that led to a diagnosis.

A trace comes as SREGym records it, a list of steps (each an object such as ``{"tool":
..., "input": ..., "output": ...}`` or ``{"role": ..., "content": ...}``; any keys are
kept), or as free text from other harnesses. It is untrusted text like the diagnosis:
checked against the same size limit (:func:`check_trace`, the size of its JSON form),
its credentials redacted wherever they occur, in keys as in values, in every step and
in the diagnosis sent with it, and the diagnosis' own in the trace too
(:func:`redact_trace`, :func:`screen_submission`), never shown as markup, and never
shown to a judge.

:func:`trace_check` is the check in code "the evidence the diagnosis cites appears in
the trace": whether an answer's quote occurs in the trace the way the evidence check
finds quotes in the diagnosis (:mod:`judge.evidence`). It informs an adjudicator; it
changes no answer and no verdict.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from judge.errors import InputError
from judge.evidence import quote_in, searchable
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, check_text
from judge.prompt import normalize_untrusted
from judge.screening import Screening, screen
from judge.secrets import KnownValues, Redacted, is_candidate, recorded_values, redact, sweepable

__all__ = [
    "Trace",
    "TraceCheck",
    "TraceText",
    "check_trace",
    "redact_trace",
    "redacted_trace",
    "screen_submission",
    "step_text",
    "swept_trace",
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


#: what a value a credential was found in is replaced with, whole
_MARKER = "[REDACTED:{}]"
#: a Kubernetes env entry's keys: ``{"name": "DB_PASSWORD", "value": "hunter22"}``
_ENTRY_KEYS = ("name", "value")


class _Redaction:
    """One pass over a trace of steps: each text redacted, also of the ``known`` values
    (``judge.secrets.redact``), and the values found in them collected in ``found``."""

    def __init__(self, known: Mapping[str, str] | None = None) -> None:
        self._known = KnownValues(known)  # one pattern for every text of the pass
        #: the values found, with their kinds (``Redacted.values_in``)
        self.found: dict[str, str] = {}

    def text(self, text: str) -> Redacted:
        """``text`` redacted; what was found in it is collected."""
        redacted = redact(text, known=self._known)
        self.found.update(redacted.values_in(text))
        return redacted

    def value(self, value: Any) -> Any:
        """A step, or any value in one, redacted however deep."""
        if isinstance(value, str):
            return self.text(value).text
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            return self._object(value)
        return value

    def _object(self, value: dict[Any, Any]) -> dict[Any, Any]:
        """An object as its JSON text is redacted: each value read with its key
        (:meth:`_under_key`), an env entry's value with its name, and the keys themselves
        (a tool that reports per target may key its output by a connection URL), while
        keys that redact alike stay apart (:func:`_distinct_keys`)."""
        items = {key: self._under_key(key, item) for key, item in value.items()}
        entry = _entry_keys(value)
        if entry is not None and _scalar(own := items[entry[1]]):
            head = '{"name": ' + _json(value[entry[0]]) + ', "value": '
            if (kind := self._keyed(head, own)) is not None:
                items[entry[1]] = self._whole(own, kind)
        keys = _distinct_keys([(k, self.text(k).text if isinstance(k, str) else k) for k in value])
        return dict(zip(keys, items.values(), strict=True))

    def _keyed(self, head: str, value: Any) -> str | None:
        """The kind of the first credential found reaching into the JSON text of ``value``
        (a string, a number or a bool) where it follows ``head`` (``{"DB_PASSWORD": ``)
        in an object's JSON text; None when none does."""
        body = _json(value)
        keyed = redact(f"{head}{body}}}", known=self._known)
        if keyed.normalized:
            head, body = normalize_untrusted(head), normalize_untrusted(body)
        start, end = len(head), len(head) + len(body)
        return next((f.kind for f in keyed.findings if f.start < end and start < f.end), None)

    def _under_key(self, key: Any, value: Any) -> Any:
        """``value`` redacted; a string, a number or a bool also as its key's value, as
        the object's JSON text reads it: ``{"DB_PASSWORD": "hunter22"}`` is a credential
        that ``hunter22`` alone is not. Read so only under a key a detector could look for
        (``judge.secrets.is_candidate``). A value a finding reaches into is replaced whole
        by the string ``[REDACTED:<kind>]``, whatever it was: a detector may stop at a
        quote inside a password, and a number's digits are a password too."""
        own = self.value(value)
        if not (_scalar(own) and isinstance(key, str) and is_candidate(key)):
            return own
        kind = self._keyed("{" + _json(key) + ": ", own)
        return own if kind is None else self._whole(own, kind)

    def _whole(self, value: Any, kind: str) -> str:
        """The marker that replaces ``value`` (a string, a number or a bool) whole; the
        value, as a text shows it, is collected as found."""
        self.found.update(sweepable([(step_text(value), kind)]))
        return _MARKER.format(kind)


def _entry_keys(value: dict[Any, Any]) -> tuple[str, str] | None:
    """The keys of the name and the value of a Kubernetes env entry (``{"name":
    "DB_PASSWORD", "value": "hunter22"}``, any case) whose name a detector could look
    for (``judge.secrets.is_candidate``): its value is read with its name, as
    ``judge.secret_plugins.ENV_ENTRY`` reads the entry's text. None for other objects."""
    keys = {k.lower(): k for k in value if isinstance(k, str) and k.lower() in _ENTRY_KEYS}
    if len(keys) < len(_ENTRY_KEYS):
        return None
    name = value[keys["name"]]
    return (keys["name"], keys["value"]) if isinstance(name, str) and is_candidate(name) else None


def _distinct_keys(keys: list[tuple[Any, Any]]) -> list[Any]:
    """Each ``(key, redacted key)``'s redacted key, numbered (``"x (2)"``) where it
    repeats another: two connection URLs whose passwords alone differ keep their values
    apart. A key that redaction left as it was keeps its text."""
    taken = {redacted for key, redacted in keys if redacted == key}
    distinct: list[Any] = []
    for key, redacted in keys:
        number, name = 1, redacted
        while redacted != key and name in taken:
            number += 1
            name = f"{redacted} ({number})"
        taken.add(name)
        distinct.append(name)
    return distinct


def _scalar(value: Any) -> bool:
    """A string, a number or a bool: a value its JSON text may show as a credential."""
    return isinstance(value, str | int | float)


def redact_trace(trace: Trace) -> Trace:
    """``trace`` with every credential in its text replaced by ``[REDACTED:<kind>]``, as
    the diagnosis' are: in free text, and in steps every key and every value however
    deep, a value also read with its key (or an env entry's with its name) as the
    step's JSON text would be (:func:`redacted_trace`)."""
    return redacted_trace(trace)[0]


def redacted_trace(trace: Trace) -> tuple[Trace, dict[str, str]]:
    """``trace`` redacted (:func:`redact_trace`), and the values found in it with their
    kinds (``judge.secrets.Redacted.values_in``), to be redacted wherever else the
    submission holds them. A value found in one step is redacted in every other step
    too, as in a free-text trace."""
    if isinstance(trace, str):
        redacted = redact(trace)
        return redacted.text, redacted.values_in(trace)
    first = _Redaction()
    steps = [first.value(step) for step in trace]
    # a second pass, over the steps as redacted: the values found anywhere
    return swept_trace(steps, first.found), first.found


def swept_trace(trace: Trace, known: Mapping[str, str]) -> Trace:
    """A redacted ``trace`` with the ``known`` values (found in its other steps, or in the
    diagnosis sent with it) redacted too wherever they stand as whole tokens, in keys as
    in values, however deep."""
    if not known:
        return trace
    if isinstance(trace, str):
        return redact(trace, known=known).text
    sweep = _Redaction(known)
    return [sweep.value(step) for step in trace]


def screen_submission(diagnosis: str, trace: Trace | None) -> tuple[Screening, Trace | None]:
    """A submission's diagnosis screened (``judge.screening.screen``) and its trace
    redacted, as they are stored: the trace first, so that a credential found in it is
    redacted in the diagnosis too, then a credential found in the diagnosis alone in the
    trace too (:func:`swept_trace`)."""
    if trace is None:
        return screen(diagnosis), None
    redacted, found = redacted_trace(trace)
    screening = screen(diagnosis, known=found)
    shown = recorded_values(diagnosis, screening.redactions)
    return screening, swept_trace(redacted, {v: k for v, k in shown.items() if v not in found})


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
