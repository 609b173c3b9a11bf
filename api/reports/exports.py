"""Exports of stored gradings, streamed as text chunks: JSONL, CSV and SREGym's CSV.

- ``jsonl``: one grading object per line (the API's shape, ground truth included).
- ``csv``: one row per grading, then one column per question with the effective answer
  and one with the judge's (``D1-Q1``, ``D1-Q1.judge``), for every rubric in scope, and
  last ``scenario_version`` (the ground-truth version graded against; empty when inline).
  Text a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@`` first) is made
  inert with a leading ``'`` (``api.tabular.inert_cells``).
- ``sregym``: the columns SREGym writes per attempt (``problem_id``, ``attempt``,
  ``Diagnosis.success``, ``Diagnosis.composite_score``, ``Diagnosis.dimensions``,
  ``Diagnosis.checklist`` ...), dicts and lists as Python reprs as SREGym's
  ``csv.DictWriter`` leaves them, so results plug back into SREGym tooling; ours after
  them, ``scenario_version`` last; its cells as they are (a round trip is byte for byte).

Effective values (after human overrides) everywhere; the judge's own beside them where
the format has room.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterable
from typing import Any, Literal

from api.reports.effective import record_answers
from api.reports.export_reads import ExportedGrading, GradingExport, rubric_for
from api.reports.sregym_rows import SREGYM_COLUMNS, sregym_row
from api.service.presenters import grading_public
from api.service.principal import Principal
from api.tabular import inert_cells
from judge.masking import mask_passwords
from judge.rubric import Rubric

__all__ = ["EXPORT_FORMATS", "MEDIA_TYPES", "ExportFormat", "export_chunks"]

ExportFormat = Literal["jsonl", "csv", "sregym"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("jsonl", "csv", "sregym")
MEDIA_TYPES: dict[ExportFormat, str] = {
    "jsonl": "application/x-ndjson",
    "csv": "text/csv",
    "sregym": "text/csv",
}

#: exports are read by whoever holds the database or an admin token
_EXPORTER = Principal(id="export", name="export", role="admin")

_GRADING_COLUMNS = (
    "grading_id",
    "submission_id",
    "status",
    "unscored_reason",
    "agent",
    "model",
    "scenario_id",
    "ground_truth_source",
    "run_id",
    "attempt",
    "rubric_id",
    "rubric_version",
    "judge_backend",
    "judge_model",
    "yes_count",
    "composite",
    "passed",
    "held",
    "judge_passed",
    "overridden",
    "needs_review",
    "provisional",
    "is_current",
    "tags",
    "created_at",
    "graded_at",
)
#: after the question columns, so the columns before keep their places
_LAST_COLUMN = "scenario_version"


def _csv_line(values: Iterable[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerow(values)
    return buffer.getvalue()


def _inert_csv_line(values: Iterable[Any]) -> str:
    """A line of the CSV meant for people: text a spreadsheet would run made inert."""
    return _csv_line(inert_cells(values))


def question_ids(rubrics: dict[tuple[str, str], Rubric], answered: Iterable[str] = ()) -> list[str]:
    """Every question id of the rubrics, in rubric order, each once; then those of
    ``answered`` (the answers' question ids) no rubric in hand names, so that no answer
    of a grading is left out."""
    seen: dict[str, None] = {}
    for key in sorted(rubrics):
        for question in rubrics[key].questions:
            seen.setdefault(question.id)
    for question_id in answered:
        seen.setdefault(question_id)
    return list(seen)


def _csv_row(item: ExportedGrading, questions: list[str]) -> list[Any]:
    g, s = item.view.grading, item.view.submission
    values = {
        "grading_id": g.id,
        "submission_id": g.submission_id,
        "agent": s.agent,
        "model": s.model,
        "scenario_id": s.scenario_id,
        "ground_truth_source": s.ground_truth_source,
        "run_id": s.run_id,
        "attempt": s.attempt,
        # a panel's model holds its members' specs: their credentials masked
        "judge_model": mask_passwords(g.judge_model),
        "tags": ";".join(t.tag for t in item.tags),
        "created_at": g.created_at.isoformat(),
        "graded_at": g.graded_at.isoformat() if g.graded_at else None,
    }
    row = [values[c] if c in values else getattr(g, c) for c in _GRADING_COLUMNS]
    effective = record_answers(item.view.answers, item.overrides)
    judge = {a.question_id: a.judge_answer for a in item.view.answers}
    for question in questions:
        row += [_yes_no(effective.get(question)), _yes_no(judge.get(question))]
    return [*row, g.scenario_version]


def _rubric_of(rubrics: dict[tuple[str, str], Rubric], item: ExportedGrading) -> Rubric | None:
    """The rubric ``item`` is exported with: the one its grading object shows."""
    return rubric_for(rubrics, item.view.grading, (a.question_id for a in item.view.answers))


def _yes_no(value: bool | None) -> str | None:
    return None if value is None else ("yes" if value else "no")


async def export_chunks(export: GradingExport, fmt: ExportFormat) -> AsyncIterator[str]:
    """The export as text chunks (a header, then one chunk per grading)."""
    rubrics = export.rubrics
    if fmt == "jsonl":
        async for item in export.gradings:
            body = grading_public(
                item.view,
                rubric=_rubric_of(rubrics, item),
                principal=_EXPORTER,
                overrides=item.overrides,
                tags=item.tags,
            )
            yield _one_line(json.dumps(body.model_dump(mode="json"), ensure_ascii=False))
    elif fmt == "csv":
        questions = question_ids(rubrics, export.answered_questions)
        answers = [f"{q}{s}" for q in questions for s in ("", ".judge")]
        header = [*_GRADING_COLUMNS, *answers, _LAST_COLUMN]
        yield _inert_csv_line(header)
        async for item in export.gradings:
            yield _inert_csv_line(_csv_row(item, questions))
    else:
        yield _csv_line(SREGYM_COLUMNS)
        async for item in export.gradings:
            row = sregym_row(item, _rubric_of(rubrics, item))
            yield _csv_line(row[c] for c in SREGYM_COLUMNS)


#: characters line readers take for line ends that JSON leaves unescaped in a string
_LINE_ENDS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"})


def _one_line(text: str) -> str:
    """A JSON document on one line, whatever its strings hold: the separators Unicode
    counts as line ends (U+2028, U+2029, NEL) escaped, as ``X-Export-Rows`` counts it."""
    return text.translate(_LINE_ENDS) + "\n"
