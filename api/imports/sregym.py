"""Reading SREGym results folders: one CSV row per attempt.

SREGym writes ``<datetime>/<agent>/<problem_id>/...*.csv`` with the columns
``problem_id``, ``attempt``, ``TTL``, ``TTM``, ``timed_out`` or ``deploy_failed``,
``Diagnosis.*`` and ``Mitigation.*``, each attempt in several files (alone, in its
problem's file with the agent's earlier rows, in ``<agent>_ALL_results.csv``): a row's run
and agent are its file's (:func:`_locate`). Each attempt's own file is read before those
that gather rows (:func:`_reading_order`), and a CSV file with no ``problem_id`` column
(an agent's own log, such as stratus's ``<pid>_stratus_output.csv`` in ``run_<n>/``) is
no results file and is skipped. ``Diagnosis.dimensions`` and
``Diagnosis.checklist`` are Python reprs of a dict and a list: they are read with
``ast.literal_eval``, never ``eval``. A row the client's SREGym drop-in
(``sre_judge_client.sregym``) wrote names the grading of this service it reports, in the
drop-in's own sentence that ends (or error that starts) ``Diagnosis.reasoning``: that
id is read as a UUID and nothing else (:func:`_named_grading`). A row that holds a
verdict alone (an empty checklist beside ``Diagnosis.success``: the drop-in's for a
token shown verdicts only, an export's of an attempt a human's verdict decided) is told
apart from an unreadable one, whatever its reasoning names. The
cell is a judge's free text, which a diagnosis can steer: the id is a claim, which the
import takes only when the grading's submission is the row's attempt
(``api.imports.queries``).
A ``trace`` (or ``Diagnosis.trace``) column, where
a row has one, holds the agent's trace: a list of steps (JSON or such a repr) or text,
read with its credentials redacted. The cells kept for export are redacted too where a
credential may be (:func:`kept_cells`), and so are the checklist's evidence and text
kept beside the verdict. Nothing here touches the database.

Each row is checked by the rules the API applies to a submission (what the databases
store, :mod:`storage.storable`; the text limits, :mod:`judge.inputs`; a file's path
from the run folder on, :func:`api.sregym_archive.relative_path`): a row that breaks
one is refused, naming its file, line and column, and the other rows are read on. A
byte order mark at the start of a file is no part of its first column's name.

Why this module is long: it is one reader, of SREGym's folders as SREGym's driver
writes them: where a file sits in the layout, what each cell and literal means, and the
checks a row meets before it is taken. Split, the reading of a row and its checks would
be two halves of one rule.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
import sys
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path, PurePath, PurePosixPath
from typing import Any, Literal, NamedTuple

from api.imports.problems import ImportProblem
from api.sregym_archive import csv_files, is_csv_file, relative_path
from judge.errors import InputError
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, check_text
from judge.secrets import KnownValues, redact
from judge.trace import Trace, check_trace, redacted_trace, swept_trace
from storage.storable import (
    MAX_INT32,
    MAX_JSON_DEPTH,
    printable,
    stored_date,
    too_deep,
    unstorable,
    unstorable_value,
)

__all__ = [
    "AGENT_COLUMNS",
    "DIAGNOSIS_COLUMN",
    "AttemptOutcome",
    "SregymAnswer",
    "SregymAttempt",
    "SregymOutline",
    "in_reading_order",
    "kept_cells",
    "read_sregym_folder",
    "run_started_at",
    "sregym_outline",
]

AttemptOutcome = Literal["diagnosed", "no_submission", "timed_out", "deploy_failed"]

#: the longest CSV cell read: any (Python's csv module stops at 128 KiB by default, which
#: refused the rest of a file from a long trace on; a cell too long to keep is refused
#: with its row by the text limits, and a file's size is bounded by the import's limits)
_CELL_LIMIT = min(sys.maxsize, 2**31 - 1)
_TRUE = {"true", "1", "yes", "y", "t"}
#: the words a figure's or a flag's cell may hold for "no value" (pandas writes ``nan``);
#: never read into a diagnosis, whose text they may be (:func:`_submitted`)
_EMPTY = {"", "none", "nan", "null"}
_CONFIDENCE = {"high": 0.9, "medium": 0.6, "low": 0.3}
_KEPT = ("Diagnosis.success", "Diagnosis.judgment", "Diagnosis.composite_score")
#: columns read as numbers
_NUMBERS = ("TTL", "TTM", "Diagnosis.accuracy", "Diagnosis.composite_score")
#: columns read as Python literals
_LITERALS = ("Diagnosis.dimensions", "Diagnosis.checklist")
#: the longest problem id (a scenario's id) and agent or run name the API takes
_MAX_PROBLEM_ID = 128
_MAX_NAME = 200
#: the columns a trace is read from, the first one filled
_TRACE_COLUMNS = ("trace", "Diagnosis.trace")
#: the column of the diagnosis
DIAGNOSIS_COLUMN = "Diagnosis.submission"
#: the columns of what the agent gave (its diagnosis, its trace), not of its judge's
#: result, among those SREGym writes under ``Diagnosis.``
AGENT_COLUMNS = (DIAGNOSIS_COLUMN, *_TRACE_COLUMNS)
#: the columns whose cells may hold a credential: the diagnosis, SREGym's checklist and
#: reasoning (which may quote it) and a trace; the diagnosis is read first
_SECRET_COLUMNS = (
    DIAGNOSIS_COLUMN,
    "Diagnosis.checklist",
    "Diagnosis.reasoning",
    *_TRACE_COLUMNS,
)
_RUN_FORMATS = ("%Y-%m-%d_%H-%M-%S", "%Y%m%d_%H%M%S", "%Y-%m-%dT%H-%M-%S", "%Y-%m-%d_%H%M%S")


def run_started_at(run: str) -> datetime | None:
    """The time in a results folder's name (``2025-01-15_10-30-00`` and the like), or None."""
    for pattern in _RUN_FORMATS:
        try:
            return datetime.strptime(run, pattern).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


class _Refused(ValueError):
    """A row broke a rule: the column to blame and why."""

    def __init__(self, column: str, message: str) -> None:
        super().__init__(f"{column}: {message}")
        self.column = column


@dataclass(frozen=True)
class SregymAnswer:
    """One checklist entry of SREGym's judge."""

    question_id: str
    answer: bool
    evidence: str = ""
    confidence: float | None = None


@dataclass(frozen=True)
class SregymAttempt:
    """One attempt of one agent on one problem, as the CSV row says."""

    #: ``relative/path.csv:LINE``: the file from the import's root and the line the row
    #: starts on (a quoted line break spans lines), for messages and the metadata
    source: str
    run: str
    agent: str
    problem_id: str
    attempt: int | None
    diagnosis: str
    outcome: AttemptOutcome
    #: SREGym's own figures and texts, kept in the submission's metadata
    original: dict[str, Any] = field(default_factory=dict)
    #: SREGym's checklist; None when it is missing or unreadable
    answers: tuple[SregymAnswer, ...] | None = None
    success: bool | None = None
    composite: float | None = None
    #: why the checklist could not be read, if it could not
    checklist_problem: str | None = None
    #: the checklist is SREGym's default for a judge reply it could not parse: unscored
    judge_parse_failure: bool = False
    #: the grading of an sre-judge service that the row's reasoning names (the drop-in
    #: wrote the row, or a diagnosis made a judge write its sentence: a claim, checked
    #: against the grading's submission), its id as stored (32 hex digits); None: none
    named_grading: str | None = None
    #: the row holds a verdict alone: an empty checklist beside ``Diagnosis.success``
    #: (the drop-in's for a token shown verdicts only, an export's of an attempt a
    #: human's verdict decided), no answers to grade by
    verdict_only: bool = False
    #: the CSV file from the run folder on (``<run>/<agent>/<problem_id>/x.csv``, whatever
    #: folders the results were packed under) and the row's line in it as stored (csv's
    #: line number at the row's end: part of its kept row's and its key's identity)
    path: str = ""
    line: int = 0
    #: the file's header and every cell of the row as written, for a lossless export
    columns: tuple[str, ...] = ()
    cells: dict[str, str | None] = field(default_factory=dict)
    #: the agent's trace from the ``trace`` (or ``Diagnosis.trace``) column: a list of
    #: steps (JSON or a Python repr of a list of dicts) or free text; None: no trace
    trace: Trace | None = None
    #: the credentials found in the trace, with their kinds, redacted in the diagnosis
    #: too when it is stored (``judge.trace.screen_submission``); never stored. Those
    #: found in the diagnosis are redacted in ``trace`` and ``cells`` already
    trace_secrets: Mapping[str, str] = field(default_factory=dict, repr=False)


def _flag(value: str | None) -> bool:
    """Is a cell true: a word for true (``True``, ``yes``, ``1``, any case) or the number 1
    however written (``1.0``: pandas writes a bool column with gaps as floats)? Any other
    word or number (``0.0``, ``2``, ``maybe``) is false."""
    text = (value or "").strip().lower()
    return text in _TRUE or _number(text) == 1


def _text(value: str | None) -> str:
    text = (value or "").strip()
    return "" if text.lower() in _EMPTY else text


def _submitted(value: str | None) -> str:
    """The diagnosis a ``Diagnosis.submission`` cell holds, without surrounding spaces; ""
    only for a blank cell. SREGym's writer writes a missing submission as an empty cell,
    so ``None``, ``null`` or ``nan`` is text an agent submitted (and SREGym judged), not
    the absence of one."""
    return (value or "").strip()


def _number(value: str | None) -> float | None:
    try:
        return float(_text(value)) if _text(value) else None
    except ValueError:
        return None


def _integer(value: str | None) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else None


#: what ``ast.literal_eval`` of a cell may raise (TypeError: an unhashable key or member,
#: ``{[1]: 2}``): the cell is unreadable, the row is not the whole file's failure
_UNREADABLE = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


def _literal(value: str | None) -> Any:
    text = _text(value)
    return ast.literal_eval(text) if text else None


def _answers(raw: Any) -> tuple[SregymAnswer, ...]:
    """The checklist's answers, else ValueError naming the entry by its position (from
    1), never by its content: the reason is stored, and an entry's evidence may quote a
    credential."""
    if not isinstance(raw, list | tuple) or not raw:
        raise ValueError("expected a non-empty list of checklist entries")
    answers: list[SregymAnswer] = []
    for number, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict):
            raise ValueError(f"checklist entry {number} is not a dict")
        qid = entry.get("id") or entry.get("question_id")
        said = entry.get("answer")
        if not isinstance(qid, str) or said is None:
            raise ValueError(f"checklist entry {number} has no id or answer")
        earlier = next((n for n, a in enumerate(answers, start=1) if a.question_id == qid), 0)
        if earlier:
            raise ValueError(f"checklist entries {earlier} and {number} answer one question")
        yes = said if isinstance(said, bool) else _flag(str(said))
        confidence = _CONFIDENCE.get(str(entry.get("confidence", "")).strip().lower())
        evidence = redact(str(entry.get("evidence") or "")).text  # it may quote a credential
        answers.append(SregymAnswer(qid, yes, evidence, confidence))
    return tuple(answers)


def _json_keys(value: Any) -> Any:
    """A parsed repr with each dict key JSON cannot hold (a tuple, a frozenset, bytes)
    as its text, ``('user-service', 'cpu')``, the way its values are turned into JSON
    (``default=str``); keys JSON holds (strings, numbers, bools, None) as they are."""
    if isinstance(value, dict):
        held = (str, int, float, type(None))
        return {k if isinstance(k, held) else str(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_keys(item) for item in value]
    return value


def _trace(row: dict[str, str], *, max_bytes: int) -> tuple[str, Trace, dict[str, str]] | None:
    """The row's trace column and trace: a list of steps where the cell holds one (as
    JSON, or as the Python repr SREGym writes its other lists in), else the cell's text;
    None if there is none. Its credentials are redacted, and returned with their kinds
    to be redacted wherever else the row holds them (``judge.trace.redacted_trace``)."""
    column = next((c for c in _TRACE_COLUMNS if _text(row.get(c))), None)
    if column is None:
        return None
    text = _text(row.get(column))
    if too_deep(text) is not None:
        raise _Refused(column, f"nested deeper than {MAX_JSON_DEPTH} levels")
    trace: Trace = text
    if text.startswith("["):
        for parse in (json.loads, ast.literal_eval):
            try:
                steps = parse(text)
            except _UNREADABLE:
                continue
            if isinstance(steps, list) and all(isinstance(step, dict) for step in steps):
                # a repr's tuples, sets or bytes as JSON holds them (or as their text),
                # and its keys too: a tuple key is read as its text, not a failed row
                trace = json.loads(json.dumps(_json_keys(steps), default=str))
                break
    try:
        check_trace(trace, field=column, max_bytes=max_bytes)
    except InputError as exc:
        raise _Refused(column, str(exc)) from None
    if isinstance(trace, list) and (found := unstorable_value(trace)):
        raise _Refused(column, f"{found[0]}: {found[1]}")
    return (column, *redacted_trace(trace))


def _outcome(row: dict[str, str], diagnosis: str) -> AttemptOutcome:
    """What the attempt came to. SREGym times an attempt out over all its stages: an
    attempt that submitted a diagnosis and was judged (a checklist or a success) before
    it timed out (mitigating, say) diagnosed; its ``timed_out`` is kept beside."""
    if _flag(row.get("deploy_failed")):
        return "deploy_failed"
    judged = _text(row.get("Diagnosis.checklist")) or _text(row.get("Diagnosis.success"))
    if diagnosis and judged:
        return "diagnosed"
    if _flag(row.get("timed_out")):
        return "timed_out"
    return "diagnosed" if diagnosis else "no_submission"


#: how the drop-in (``sre_judge_client.sregym``) names the grading it reports: the
#: sentence that ends the reasoning of a verdict, the start of its error for a grading
#: that ended unscored or was still pending; an id is taken where the sentence is, never
#: from within the text before it (the judge's evidence there quotes the diagnosis)
_DROPIN_GRADED = re.compile(r"Graded by sre-judge: grading ([0-9A-Za-z-]{1,64})\.\Z")
_DROPIN_ERROR = re.compile(r"\AError: sre-judge grading ([0-9A-Za-z-]{1,64}) is [a-z_]+ \(")


class _Named(NamedTuple):
    """The sre-judge grading a row names: its id as stored (32 lowercase hex digits), and
    whether the row reports its verdict (not the drop-in's error for it)."""

    grading: str
    verdict: bool


def _named_grading(reasoning: str | None) -> _Named | None:
    """The sre-judge grading a ``Diagnosis.reasoning`` cell names in the drop-in's words;
    None unless the cell holds one of its sentences with a UUID (32 hex digits, or the
    hyphenated form) in place."""
    text = (reasoning or "").strip()
    found = _DROPIN_GRADED.search(text) or _DROPIN_ERROR.match(text)
    if found is None:
        return None
    named = found.group(1).lower()
    try:
        grading = uuid.UUID(named)
    except ValueError:
        return None
    if named not in (grading.hex, str(grading)):
        return None
    return _Named(grading.hex, found.re is _DROPIN_GRADED)


#: the evidence of SREGym's default checklist when its judge's reply could not be parsed
#: (``DiagnosisJudge``: nine "No", "parse failure — defaulting to No", Low)
_PARSE_FAILURE = "parse failure"


def _parse_failure_default(answers: tuple[SregymAnswer, ...]) -> bool:
    """Is the checklist SREGym's default for a judge reply it could not parse (every answer
    No with that evidence)? It says nothing of the diagnosis: not a failed one."""
    return bool(answers) and all(
        not a.answer and a.evidence.strip().lower().startswith(_PARSE_FAILURE) for a in answers
    )


def _checklist(
    row: Mapping[str, str | None], named: _Named | None, success: str
) -> tuple[tuple[SregymAnswer, ...] | None, str | None, bool]:
    """A diagnosed row's checklist: its answers, or why there are none; and whether the
    row holds a verdict alone: an empty checklist beside a ``Diagnosis.success``
    (``success``), as the drop-in writes for a token shown verdicts only (naming the
    grading it reports, ``named``) and an export writes for an attempt a human's verdict
    decided. SREGym's error shape (``Diagnosis.judgment`` ``Error``, or the drop-in's
    error naming a grading) holds no verdict."""
    error = _text(row.get("Diagnosis.judgment")).lower() == "error"
    error = error or (named is not None and not named.verdict)
    try:
        listed = _literal(row.get("Diagnosis.checklist"))
        if not (success and not error and listed in ([], ())):
            return _answers(listed), None, False
    except _UNREADABLE as exc:
        return None, f"Diagnosis.checklist is not readable: {str(exc)[:200]}", False
    verdict = (
        "its verdict" if named is None else f"the verdict of sre-judge grading {named.grading}"
    )
    why = (
        f"Diagnosis.checklist is empty: the row holds {verdict} alone "
        f"(Diagnosis.success {_flag(success)}), without its answers"
    )
    return None, why, True


def kept_cells(
    row: Mapping[str, str | None], *, known: Mapping[str, str] | None = None
) -> dict[str, str | None]:
    """A row's cells as kept for export: those that may hold a credential (the diagnosis,
    SREGym's checklist and reasoning, a trace) redacted (``judge.secrets.redact``; with
    ``known``, the credentials found in the row's trace too; a credential found in the
    diagnosis, in the other cells too), every other cell as written. Redacting kept
    cells again changes nothing."""
    return _kept_cells(row, known=known or {})[0]


def _kept_cells(
    row: Mapping[str, str | None], *, known: Mapping[str, str]
) -> tuple[dict[str, str | None], dict[str, str]]:
    """:func:`kept_cells`, and the credentials found in the diagnosis that ``known`` does
    not hold, with their kinds, to be redacted in the row's trace too."""
    cells = {k: v for k, v in row.items() if k is not None}
    sweep = KnownValues(known)
    shown: dict[str, str] = {}
    for column in _SECRET_COLUMNS:  # the diagnosis first
        if text := cells.get(column):
            redacted = redact(text, known=sweep)
            cells[column] = redacted.text
            if column == DIAGNOSIS_COLUMN:
                found = redacted.values_in(text).items()
                shown = {value: kind for value, kind in found if value not in known}
                sweep = KnownValues({**known, **shown}) if shown else sweep
    return cells, shown


def _original(row: Mapping[str, str | None]) -> dict[str, Any]:
    kept: dict[str, Any] = {
        "TTL": _number(row.get("TTL")),
        "TTM": _number(row.get("TTM")),
        "accuracy": _number(row.get("Diagnosis.accuracy")),
        "dimensions_text": row.get("Diagnosis.dimensions") or None,
        "checklist_text": row.get("Diagnosis.checklist") or None,
        "mitigation": {k: v for k, v in row.items() if k and k.startswith("Mitigation.")},
    }
    for column in _KEPT:
        kept[column.split(".", 1)[1]] = row.get(column) or None
    try:
        kept["dimensions"] = _literal(row.get("Diagnosis.dimensions"))
    except _UNREADABLE:
        kept["dimensions"] = None
    return kept


#: the name's end of SREGym's file of every row of one agent, ``<run>/<agent>_ALL_results.csv``
_ALL_FILE = "_ALL_results.csv"


class _Place(NamedTuple):
    """Where a CSV file is in SREGym's layout: the run and agent its rows are of, and the
    index in its path of the folder the layout starts at (the run folder; 0 when the
    path names no run)."""

    run: str
    agent: str
    start: int


def _locate(relative: Path, problem_id: str) -> _Place:
    """The run, agent and layout's start from the file's place in the results folder.

    SREGym writes each attempt three times: ``<run>/<agent>/<pid>/run_<n>/<pid>_results.csv``
    (the attempt alone), ``<run>/<agent>/<pid>/<pid>_<agent>_results.csv`` (every row of
    the agent so far: the rows of the problems run before ``<pid>`` too) and
    ``<run>/<agent>_ALL_results.csv`` (every row of the agent). So the run and agent are
    those of the file, not of the folder of the row's problem: ``<agent>_ALL_results.csv``
    is the agent's file in its run folder; a file under its own problem's folder
    (``<pid>/<pid>_<agent>_results.csv``) gives the two folders above that one; any other
    file, the two folders above the row's problem's folder (a problem id with ``/`` in
    it spans as many folders as it has parts), else the folder it is in. An attempt's own
    file of a problem whose id ends in ``_ALL`` (``scale_ALL/run_1/scale_ALL_results.csv``)
    is that, not an agent's file. Folders above the run folder (those the results were
    packed under) are no part of the layout."""
    parts, name = relative.parts[:-1], relative.name
    if (
        name.endswith(_ALL_FILE)
        and len(name) > len(_ALL_FILE)
        and not _own_file(relative, problem_id)
    ):
        agent, run_at = name[: -len(_ALL_FILE)], len(parts) - 1
    elif len(parts) >= 2 and name == f"{parts[-1]}_{parts[-2]}_results.csv":
        agent, run_at = parts[-2], len(parts) - 3
    else:
        named = tuple(problem_id.split("/"))
        spans = range(len(parts) - len(named) + 1)
        at = next((i for i in spans if parts[i : i + len(named)] == named), None)
        if at is None:
            return _Place(parts[0] if len(parts) > 1 else "", parts[-1] if parts else "", 0)
        agent, run_at = (parts[at - 1] if at >= 1 else ""), at - 2
    return _Place(parts[run_at], agent, run_at) if run_at >= 0 else _Place("", agent, 0)


def _own_file(relative: Path, problem_id: str) -> bool:
    """Is the file an attempt's own, ``<pid>/run_<n>/<pid>_results.csv``?"""
    pid = re.escape(problem_id)
    own = rf"(?:.*/)?{pid}/{_ATTEMPT_FOLDER.pattern}/{pid}_results\.csv"
    return re.fullmatch(own, relative.as_posix(), re.DOTALL) is not None


def _unstorable_cell(text: str) -> str | None:
    """Why a cell (or a column's name) cannot be stored. Files are read with bytes that
    are not UTF-8 kept as lone surrogates (``surrogateescape``), so that such a byte
    refuses its row alone: those are the only surrogates a decoded file holds."""
    problem = unstorable(text)
    if problem is not None and "\x00" not in text:
        return "is not UTF-8 text (a byte that starts no character)"
    return problem


def _check_cells(row: dict[str, Any]) -> None:
    """Every column name and cell can be stored (extra cells, under None, too)."""
    for column, value in row.items():
        name = "(extra cells)" if column is None else column
        if column is not None and (problem := _unstorable_cell(column)):
            raise _Refused(printable(column), f"the column's name {problem}")
        for cell in value if isinstance(value, list) else [value]:
            if isinstance(cell, str) and (problem := _unstorable_cell(cell)):
                raise _Refused(printable(name), problem)


def _check_figures(row: dict[str, str]) -> None:
    """The attempt a whole number an INTEGER column stores; SREGym's figures finite; its
    literals no deeper than JSON may nest."""
    attempt = _text(row.get("attempt"))
    if attempt:
        number = _number(attempt)
        if number is None or not number.is_integer() or not 0 <= number <= MAX_INT32:
            raise _Refused("attempt", f"must be a whole number from 0 to {MAX_INT32}")
    for column in _NUMBERS:
        number = _number(row.get(column))
        if number is not None and not math.isfinite(number):
            raise _Refused(column, f"{_text(row.get(column))[:40]!r} is not a finite number")
    for column in _LITERALS:
        if too_deep(_text(row.get(column))) is not None:
            raise _Refused(column, f"nested deeper than {MAX_JSON_DEPTH} levels")


def _check_names(problem_id: str, run: str, agent: str) -> None:
    if len(problem_id) > _MAX_PROBLEM_ID:
        raise _Refused("problem_id", f"longer than {_MAX_PROBLEM_ID} characters")
    for name, value in (("run", run), ("agent", agent)):
        if len(value) > _MAX_NAME:
            raise _Refused(name, f"the folder's name is longer than {_MAX_NAME} characters")
    started = run_started_at(run)
    if started is not None:
        try:
            stored_date(started)
        except ValueError as exc:
            raise _Refused("run", f"the folder's time {exc}") from None


def _check_shape(row: dict[str, str], columns: tuple[str, ...]) -> None:
    """Refuse a row with more or fewer cells than its header: SREGym's writer gives every
    row one cell per column, and the export gives back the cells a row had, column by
    column (an extra cell would be dropped, a missing one written empty)."""
    extra = row.get(None)  # type: ignore[call-overload]  # DictReader's rest of the row
    missing = [c for c in columns if row.get(c) is None]
    if extra or missing:
        cells = len(columns) + len(extra or ()) - len(missing)
        raise ValueError(f"the row has {cells} cells, its header {len(columns)} columns")


def _attempt(
    source: str,
    relative: Path,
    row: dict[str, str],
    columns: tuple[str, ...],
    line: int,
    *,
    max_bytes: int = DEFAULT_MAX_TEXT_BYTES,
) -> SregymAttempt:
    _check_shape(row, columns)
    _check_cells(row)
    problem_id = _text(row.get("problem_id"))
    if not problem_id:
        raise ValueError("the row has no problem_id")
    run, agent, start = _locate(relative, problem_id)
    path = "/".join(relative.parts[start:])  # from the run folder on
    relative_path(path)  # kept for the export, which writes the file back there
    _check_names(problem_id, run, agent)
    _check_figures(row)
    diagnosis = _submitted(row.get(DIAGNOSIS_COLUMN))
    try:
        check_text(diagnosis, field=DIAGNOSIS_COLUMN, max_bytes=max_bytes)
    except InputError as exc:
        raise _Refused(DIAGNOSIS_COLUMN, str(exc)) from None
    traced = _trace(row, max_bytes=max_bytes)
    secrets = {} if traced is None else traced[2]
    # the row as kept for export holds no credential in clear either, nor does the
    # trace hold one that the diagnosis shows
    cells, shown = _kept_cells(row, known=secrets)
    trace = None if traced is None else swept_trace(traced[1], shown)
    outcome = _outcome(row, diagnosis)
    named = _named_grading(row.get("Diagnosis.reasoning"))
    success_text = _text(row.get("Diagnosis.success"))
    answers, problem, verdict_only = None, None, False
    if outcome == "diagnosed":
        answers, problem, verdict_only = _checklist(row, named, success_text)
    parse_failure = answers is not None and _parse_failure_default(answers)
    if parse_failure:
        problem = "Diagnosis.checklist is SREGym's default for a judge reply it could not parse"
    for answer in answers or ():  # a literal's escapes decode to what no cell holds
        for text in (answer.question_id, answer.evidence):
            if problem_text := unstorable(text):
                raise _Refused("Diagnosis.checklist", f"an entry {problem_text}")
    original = _original(cells)  # its checklist text redacted
    if found := unstorable_value(original):  # e.g. 1e999 in Diagnosis.dimensions
        where, why = found
        raise _Refused("Diagnosis.dimensions" if where.startswith("dimensions") else where, why)
    if outcome == "diagnosed" and _flag(row.get("timed_out")):
        original["timed_out"] = True
    return SregymAttempt(
        source=source,
        run=run,
        agent=agent,
        problem_id=problem_id,
        attempt=_integer(row.get("attempt")),
        diagnosis=diagnosis if outcome == "diagnosed" else (row.get(DIAGNOSIS_COLUMN) or ""),
        outcome=outcome,
        original=original,
        answers=answers,
        success=_flag(success_text) if success_text else None,
        composite=_number(row.get("Diagnosis.composite_score")),
        checklist_problem=problem,
        judge_parse_failure=parse_failure,
        named_grading=None if named is None else named.grading,
        verdict_only=verdict_only,
        path=path,
        line=line,
        columns=columns,
        cells=cells,
        trace=trace,
        trace_secrets=secrets,
    )


class _Lines:
    """A file's lines as the CSV reader takes them, counted: ``first`` is the line the row
    being read starts on (0 until it takes one; the blank lines the reader skips before a
    row are no part of it). Set ``first`` to 0 before reading a row."""

    def __init__(self, handle: Iterator[str]) -> None:
        self._handle, self._count, self.first = handle, 0, 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._handle)
        self._count += 1
        if not self.first and line not in ("\n", "\r\n", "\r"):
            self.first = self._count
        return line


#: the folder of one attempt's own file, ``<pid>/run_<n>/<pid>_results.csv``
_ATTEMPT_FOLDER = re.compile(r"run_[0-9]+")
#: the column every row of a results file has; a CSV file without it is no results file
_PROBLEM_ID = "problem_id"


def _reading_key(relative: PurePath) -> tuple[bool, PurePath]:
    """Where a CSV file (its path under the import's root) comes in :func:`_reading_order`."""
    return _ATTEMPT_FOLDER.fullmatch(relative.parent.name) is None, relative


def _reading_order(root: Path, files: Collection[Path] | None = None) -> list[Path]:
    """The CSV files under ``root`` (or ``files`` of them): first those in a ``run_<n>/``
    folder (each attempt's own file), then the others (the files that gather an agent's
    rows), each part by path.

    An attempt's first copy met is the one imported, a later one that differs is a
    conflict. A run resumed from an earlier run's CSV (SREGym's ``--resume``) reruns an
    attempt whose stale copy that CSV still gives: the problem's file and
    ``<agent>_ALL_results.csv`` then hold both, and only the attempt's own file holds the
    attempt the run made."""
    found = csv_files(root) if files is None else files
    return sorted(found, key=lambda path: _reading_key(path.relative_to(root)))


def in_reading_order(problems: Iterable[ImportProblem]) -> list[ImportProblem]:
    """Problems of one folder's reading (a server's and those found here, say) in the
    order :func:`read_sregym_folder` gives them: by file (:func:`_reading_order`), each
    file's rows by line and its own problem after them; one that names no file of the
    folder (``...``: rows counted, not listed) last. Problems of one place keep their
    order."""

    def key(problem: ImportProblem) -> tuple[Any, ...]:
        file, _, line = problem.where.rpartition(":")
        if not (file and line.isdigit()):  # the file's own problem: no line
            file, line = problem.where, ""
        if not is_csv_file(PurePosixPath(file)):
            return (1,)
        return 0, _reading_key(PurePosixPath(file)), not line, int(line or 0)

    return sorted(problems, key=key)


def _csv_rows(
    root: Path, files: Collection[Path] | None = None
) -> Iterator[tuple[Path, csv.DictReader[str], dict[str, str], int] | ImportProblem]:
    """Every data row of every results CSV under ``root`` (or of ``files`` of them,
    :func:`_reading_order`) with its file, its reader (whose ``line_num``, the row's last
    line, and ``fieldnames`` describe the row until the next is read) and the line it
    starts on; or, for a file that cannot be read on, a problem after the rows read
    before the fault. A file whose header has no ``problem_id`` column (an agent's own
    CSV log) is skipped: SREGym writes that column in every results file."""
    for path in _reading_order(root, files):
        relative = path.relative_to(root)
        try:
            # utf-8-sig: a byte order mark is no part of the first column's name; a byte
            # that is not UTF-8 refuses its row alone (``_unstorable_cell``)
            with path.open(newline="", encoding="utf-8-sig", errors="surrogateescape") as handle:
                if csv.field_size_limit() < _CELL_LIMIT:  # the module's, for the process
                    csv.field_size_limit(_CELL_LIMIT)
                lines = _Lines(handle)
                reader = csv.DictReader(lines)
                if _PROBLEM_ID not in (reader.fieldnames or ()):
                    continue
                twice = sorted(
                    {c for c in reader.fieldnames or () if (reader.fieldnames or ()).count(c) > 1}
                )
                if twice:  # a row would keep one of its cells: refused whole
                    yield ImportProblem(
                        str(relative), f"the header names {', '.join(twice)} more than once"
                    )
                    continue
                lines.first = 0
                for row in reader:
                    yield relative, reader, row, lines.first
                    lines.first = 0
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            yield ImportProblem(str(relative), f"cannot read: {exc}")


def read_sregym_folder(
    root: Path,
    *,
    max_bytes: int = DEFAULT_MAX_TEXT_BYTES,
    files: Collection[Path] | None = None,
) -> Iterator[SregymAttempt | ImportProblem]:
    """Every attempt of every CSV under ``root``, or a problem naming file, line and (where
    one is to blame) column. ``max_bytes``: the largest diagnosis taken; ``files``: read
    only these CSV files under ``root``, each as it is read with the rest.

    Each row is checked and its trace and cells redacted: about 1.5 ms a row with a
    trace. A caller on the event loop reads it in a worker thread."""
    for found in _csv_rows(root, files):
        if isinstance(found, ImportProblem):
            yield found
            continue
        relative, reader, row, first = found
        source = f"{relative}:{first}"  # where the row starts; its stored line is its end
        columns = tuple(reader.fieldnames or ())
        try:
            yield _attempt(source, relative, row, columns, reader.line_num, max_bytes=max_bytes)
        except _Refused as refused:
            yield ImportProblem(source, str(refused), field=refused.column)
        except ValueError as exc:
            yield ImportProblem(source, str(exc))


class SregymOutline(NamedTuple):
    """What an import job knows of a folder before it reads a row for real."""

    #: how many items :func:`read_sregym_folder` yields for it (the job's total)
    items: int
    #: the problem ids its rows name (rows that will be refused included)
    problem_ids: set[str]


def sregym_outline(root: Path) -> SregymOutline:
    """The item count and problem ids of the rows under ``root``, in one walk that
    neither checks nor redacts a row."""
    items, ids = 0, set()
    for found in _csv_rows(root):
        items += 1
        if not isinstance(found, ImportProblem) and (
            problem_id := _text(found[2].get("problem_id"))
        ):
            ids.add(problem_id)
    return SregymOutline(items, ids)
