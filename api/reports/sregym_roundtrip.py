"""Imported SREGym rows given back as SREGym wrote them (issue 16, item 3).

Each imported attempt's CSV row was kept whole (every column, in its file's order). An
export writes it back cell for cell, except the verdict columns of an attempt whose
shown grading is not SREGym's own as imported (a regrade by another judge, or a human
override): there :data:`VERDICT_COLUMNS` take that grading's values, as
:func:`sregym_row` writes them, SREGym's dimension names kept. Only columns the file
had are written; attempts that produced no diagnosis (timed out, failed deploy) keep
their empty diagnosis columns. :func:`changed_columns` names what differs and why.

Two layouts: ``folder``, SREGym's ``<datetime>/<agent>/<problem_id>/...csv`` files
with their own headers, and ``file``, one CSV with the union of the headers in the
order first seen and a last column :data:`FILE_COLUMN` naming each row's file.
"""

from __future__ import annotations

import ast
import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from api.reports.export_reads import rubric_for
from api.reports.sregym_row_reads import OriginalRow
from api.reports.sregym_rows import sregym_row
from judge.rubric import Rubric
from storage.imports.verdicts import VERDICT_COLUMNS, as_imported

__all__ = [
    "FILE_COLUMN",
    "VERDICT_COLUMNS",
    "SregymFile",
    "SregymLayout",
    "changed_columns",
    "csv_text",
    "row_cells",
    "sregym_files",
]

SregymLayout = Literal["file", "folder"]
#: the column of the one-file layout that names each row's file in the results folder
FILE_COLUMN = "sregym_file"


@dataclass(frozen=True)
class SregymFile:
    """One CSV file of the folder layout: its path, header and rows (cells by column),
    and the attempts (submission ids) whose rows it holds."""

    path: str
    columns: list[str]
    rows: list[dict[str, Any]]
    attempts: set[str] = field(default_factory=set)


def _as_cell(value: Any) -> str:
    """A value as SREGym's ``csv.DictWriter`` leaves it: None empty, the rest ``str()``."""
    return "" if value is None else str(value)


def _keep_names(original: str | None, dimensions: Any) -> Any:
    """Our dimension scores under SREGym's own dimension names, where the ids match."""
    if not isinstance(dimensions, dict) or not original:
        return dimensions
    try:
        theirs = ast.literal_eval(original)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return dimensions
    if not isinstance(theirs, dict):
        return dimensions
    named = {}
    for dim, value in dimensions.items():
        name = theirs.get(dim, {}).get("name") if isinstance(theirs.get(dim), dict) else None
        named[dim] = {**value, "name": name} if name else value
    return named


def _is_original(row: OriginalRow) -> bool:
    """Is the shown grading SREGym's own verdict as imported (or is there none)? Human
    overrides change it only while one is in force: withdrawn, the row is SREGym's again."""
    if row.grading is None:
        return True
    return as_imported(row.grading.view.grading, row.grading.overrides)


def row_cells(row: OriginalRow, rubrics: dict[tuple[str, str], Rubric]) -> dict[str, str]:
    """The row's cells by column: the original ones, verdict columns rewritten if regraded."""
    cells = {c: _as_cell(row.original.cells.get(c)) for c in row.original.columns}
    if _is_original(row):
        return cells
    assert row.grading is not None
    g = row.grading.view.grading
    answered = (a.question_id for a in row.grading.view.answers)
    ours = sregym_row(row.grading, rubric_for(rubrics, g, answered))
    ours["Diagnosis.dimensions"] = _keep_names(
        row.original.cells.get("Diagnosis.dimensions"), ours["Diagnosis.dimensions"]
    )
    for column in VERDICT_COLUMNS:
        if column in cells:
            cells[column] = _as_cell(ours[column])
    return cells


def changed_columns(row: OriginalRow, cells: dict[str, str]) -> list[str]:
    """The columns whose cell differs from the row as imported."""
    return [c for c in row.original.columns if cells[c] != (row.original.cells.get(c) or "")]


def csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """A CSV file as SREGym's ``csv.DictWriter`` writes it (header, then rows)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


async def sregym_files(
    rows: AsyncIterator[OriginalRow], rubrics: dict[tuple[str, str], Rubric]
) -> AsyncIterator[SregymFile]:
    """The rows grouped back into their files (rows arrive ordered by file, then line)."""
    current: SregymFile | None = None
    async for row in rows:
        original = row.original
        if current is None or current.path != original.path:
            if current is not None:
                yield current
            current = SregymFile(original.path, list(original.columns), [])
        for column in original.columns:
            if column not in current.columns:
                current.columns.append(column)
        current.rows.append(row_cells(row, rubrics))
        current.attempts.add(original.submission_id)
    if current is not None:
        yield current
