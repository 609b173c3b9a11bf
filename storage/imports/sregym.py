"""Reading SREGym results folders: one CSV row per attempt.

SREGym writes ``<datetime>/<agent>/<problem_id>/...*.csv`` with the columns
``problem_id``, ``attempt``, ``TTL``, ``TTM``, ``timed_out`` or ``deploy_failed``,
``Diagnosis.*`` and ``Mitigation.*``. ``Diagnosis.dimensions`` and
``Diagnosis.checklist`` are Python reprs of a dict and a list: they are read with
``ast.literal_eval``, never ``eval``. Nothing here touches the database.
"""

from __future__ import annotations

import ast
import csv
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from storage.imports.problems import ImportProblem

__all__ = ["AttemptOutcome", "SregymAnswer", "SregymAttempt", "read_sregym_folder"]

AttemptOutcome = Literal["diagnosed", "no_submission", "timed_out", "deploy_failed"]

_TRUE = {"true", "1", "yes", "y", "t"}
_EMPTY = {"", "none", "nan", "null"}
_CONFIDENCE = {"high": 0.9, "medium": 0.6, "low": 0.3}
_KEPT = ("Diagnosis.success", "Diagnosis.judgment", "Diagnosis.composite_score")


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

    #: ``relative/path.csv:LINE``
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
    #: the CSV file (relative to the results folder) and the row's line in it
    path: str = ""
    line: int = 0
    #: the file's header and every cell of the row as written, for a lossless export
    columns: tuple[str, ...] = ()
    cells: dict[str, str | None] = field(default_factory=dict)


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in _TRUE


def _text(value: str | None) -> str:
    text = (value or "").strip()
    return "" if text.lower() in _EMPTY else text


def _number(value: str | None) -> float | None:
    try:
        return float(_text(value)) if _text(value) else None
    except ValueError:
        return None


def _integer(value: str | None) -> int | None:
    number = _number(value)
    return int(number) if number is not None and number.is_integer() else None


def _literal(value: str | None) -> Any:
    text = _text(value)
    return ast.literal_eval(text) if text else None


def _answers(raw: Any) -> tuple[SregymAnswer, ...]:
    if not isinstance(raw, list | tuple) or not raw:
        raise ValueError("expected a non-empty list of checklist entries")
    answers = []
    for entry in raw:
        if not isinstance(entry, dict):
            raise ValueError(f"checklist entry {entry!r} is not a dict")
        qid = entry.get("id") or entry.get("question_id")
        said = entry.get("answer")
        if not isinstance(qid, str) or said is None:
            raise ValueError(f"checklist entry {entry!r} has no id or answer")
        yes = said if isinstance(said, bool) else str(said).strip().lower() in _TRUE
        confidence = _CONFIDENCE.get(str(entry.get("confidence", "")).strip().lower())
        answers.append(SregymAnswer(qid, yes, str(entry.get("evidence") or ""), confidence))
    return tuple(answers)


def _outcome(row: dict[str, str], diagnosis: str) -> AttemptOutcome:
    if _flag(row.get("deploy_failed")):
        return "deploy_failed"
    if _flag(row.get("timed_out")):
        return "timed_out"
    return "diagnosed" if diagnosis else "no_submission"


def _original(row: dict[str, str]) -> dict[str, Any]:
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
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        kept["dimensions"] = None
    return kept


def _locate(relative: Path, problem_id: str) -> tuple[str, str]:
    """``(run, agent)`` from ``<datetime>/<agent>/<problem_id>/...``."""
    parts = relative.parts[:-1]
    if problem_id in parts:
        at = parts.index(problem_id)
        agent = parts[at - 1] if at >= 1 else ""
        run = parts[at - 2] if at >= 2 else ""
        return run, agent
    return (parts[0] if len(parts) > 1 else ""), (parts[-1] if parts else "")


def _attempt(
    source: str, relative: Path, row: dict[str, str], columns: tuple[str, ...], line: int
) -> SregymAttempt:
    problem_id = _text(row.get("problem_id"))
    if not problem_id:
        raise ValueError("the row has no problem_id")
    run, agent = _locate(relative, problem_id)
    diagnosis = _text(row.get("Diagnosis.submission"))
    outcome = _outcome(row, diagnosis)
    answers, problem = None, None
    if outcome == "diagnosed":
        try:
            answers = _answers(_literal(row.get("Diagnosis.checklist")))
        except (ValueError, SyntaxError, MemoryError, RecursionError) as exc:
            problem = f"Diagnosis.checklist is not readable: {str(exc)[:200]}"
    success_text = _text(row.get("Diagnosis.success"))
    return SregymAttempt(
        source=source,
        run=run,
        agent=agent,
        problem_id=problem_id,
        attempt=_integer(row.get("attempt")),
        diagnosis=diagnosis if outcome == "diagnosed" else (row.get("Diagnosis.submission") or ""),
        outcome=outcome,
        original=_original(row),
        answers=answers,
        success=_flag(success_text) if success_text else None,
        composite=_number(row.get("Diagnosis.composite_score")),
        checklist_problem=problem,
        path=relative.as_posix(),
        line=line,
        columns=columns,
        cells={k: v for k, v in row.items() if k is not None},
    )


def read_sregym_folder(root: Path) -> Iterator[SregymAttempt | ImportProblem]:
    """Every attempt of every CSV under ``root``, or a problem naming file and line."""
    for path in sorted(root.rglob("*.csv")):
        relative = path.relative_to(root)
        try:
            with path.open(newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                for row in reader:
                    source = f"{relative}:{reader.line_num}"
                    columns = tuple(reader.fieldnames or ())
                    try:
                        yield _attempt(source, relative, row, columns, reader.line_num)
                    except ValueError as exc:
                        yield ImportProblem(source, str(exc))
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            yield ImportProblem(str(relative), f"cannot read: {exc}")
