"""The evaluation table: one row per scenario attempt, one column per judge, rubric
version, agent, model or run, each cell the verdict and yes count of that attempt's
grading in that column; rows whose columns disagree (a pass beside a fail) marked.

Which attempt a row is depends on what the columns compare: two judges or rubric
versions grade the same submission (its gradings, shadow regrades included), so a row
is a submission; two agents, models or runs answer the same scenario apart, so a row is
the scenario's attempt number (and, across runs, the agent's).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import desc
from sqlalchemy.orm import Session
from sqlmodel import col

from api.reports.filters import ReportFilter, filtered, group_columns, group_key, joined
from api.tabular import inert_cells
from storage import Store
from storage.tables import GradingRecord, SubmissionRecord

__all__ = [
    "COLUMN_KINDS",
    "ColumnKind",
    "EvaluationCell",
    "EvaluationRow",
    "EvaluationTable",
    "evaluation_csv",
    "evaluation_csv_headers",
    "evaluation_table",
    "table_filter",
]

ColumnKind = Literal["judge", "rubric", "agent", "model", "run"]
COLUMN_KINDS: tuple[ColumnKind, ...] = ("judge", "rubric", "agent", "model", "run")
#: the most rows one table holds; ``truncated`` says when there were more
MAX_ROWS = 5000

_G, _S = GradingRecord, SubmissionRecord


class EvaluationCell(BaseModel):
    """One attempt's grading in one column."""

    grading_id: str
    #: PASS, FAIL, HELD, UNSCORED or PENDING (after human overrides: an unscored grading
    #: a human gave a verdict is PASS or FAIL)
    verdict: str
    yes_count: int | None


class EvaluationRow(BaseModel):
    """One scenario attempt across the columns."""

    key: str
    agent: str | None
    model: str | None
    scenario_id: str | None
    run_id: str | None
    attempt: int | None
    #: column label -> the attempt's grading there (absent: not graded in that column)
    cells: dict[str, EvaluationCell]
    #: a PASS and a FAIL among the cells
    disagree: bool


class EvaluationTable(BaseModel):
    """The table, its columns in order, and how many rows disagree."""

    columns_by: ColumnKind
    columns: list[str]
    rows: list[EvaluationRow]
    disagreeing: int
    #: only the rows whose columns disagree were kept
    disagreeing_only: bool
    #: more rows matched (after ``disagreeing_only``) than ``MAX_ROWS``; the newest
    #: attempts were kept
    truncated: bool


def _verdict(status: str, passed: bool | None, held: bool) -> str:
    """The cell's word for the effective verdict, as pass rates count it: a human's
    verdict on a grading the judge could not score is a PASS or a FAIL."""
    if held:
        return "HELD"
    if passed is not None:
        return "PASS" if passed else "FAIL"
    return "UNSCORED" if status == "graded" else status.upper()


def _column_label(row: Any, by: ColumnKind) -> str:
    if by == "run":
        return row.run_id or "(no run)"
    return group_key(row, [by])[0] or f"({by}?)"


def _row_key(row: Any, by: ColumnKind) -> str:
    """The attempt a grading belongs to, given what the columns compare."""
    if by in ("judge", "rubric"):
        return str(row.submission_id)
    scenario = row.scenario_id or f"inline:{row.submission_id}"
    attempt = "" if row.attempt is None else str(row.attempt)
    if by == "run":
        return f"{row.agent or ''}|{scenario}|{attempt}"
    return f"{scenario}|{attempt}|{row.run_id or ''}"


@dataclass
class _Building:
    """A row while the gradings are read: its attempt, and per column the chosen cell
    with its rank (whether it came from a current grading, and when it was made)."""

    first: Any
    cells: dict[str, tuple[tuple[bool, Any], EvaluationCell]] = field(default_factory=dict)
    #: column -> the submission its cell grades
    submissions: dict[str, str] = field(default_factory=dict)

    def disagrees(self) -> bool:
        """A PASS and a FAIL among its cells."""
        return {"PASS", "FAIL"} <= {cell.verdict for _, cell in self.cells.values()}

    def row(self, key: str) -> EvaluationRow:
        """The finished row."""
        first = self.first
        return EvaluationRow(
            key=key, agent=first.agent, model=first.model, scenario_id=first.scenario_id,
            run_id=first.run_id, attempt=first.attempt,
            cells={column: cell for column, (_, cell) in self.cells.items()},
            disagree=self.disagrees(),
        )  # fmt: skip


def _row_for(rows: dict[str, _Building], key: str, column: str, submission_id: str) -> str:
    """The key of the row a grading of ``submission_id`` goes in: the attempt's row, or,
    when another submission already holds that row's cell of ``column`` (attempts with no
    number, two agents' attempts on one model), the next row of the same attempt
    (``key#2``, ``key#3``...): a cell never hides another submission's grading."""
    n = 1
    while True:
        candidate = key if n == 1 else f"{key}#{n}"
        building = rows.get(candidate)
        held = None if building is None else building.submissions.get(column)
        if held is None or held == submission_id:
            return candidate
        n += 1


def _read(
    session: Session, filters: ReportFilter, by: ColumnKind, disagreeing_only: bool
) -> EvaluationTable:
    """Every row of the filter, read newest first; ``disagreeing`` counts them all, and
    the cut to ``MAX_ROWS`` (the newest) comes after ``disagreeing_only`` chose its rows,
    so an old disagreement is never cut before it is looked for."""
    groups = [] if by == "run" else group_columns([by])
    query = joined(
        col(_G.id), col(_G.status), col(_G.passed), col(_G.held), col(_G.yes_count),
        col(_G.is_current), col(_G.created_at), col(_S.id).label("submission_id"),
        col(_S.agent), col(_S.model), col(_S.scenario_id), col(_S.run_id), col(_S.attempt),
        *groups,
    )  # fmt: skip
    query = filtered(query, filters).order_by(desc(col(_G.created_at)), desc(col(_G.id)))
    rows: dict[str, _Building] = {}
    for record in session.execute(query):
        column = _column_label(record, by)
        key = _row_for(rows, _row_key(record, by), column, str(record.submission_id))
        building = rows.get(key)
        if building is None:
            building = rows[key] = _Building(record)
        building.submissions[column] = str(record.submission_id)
        rank = (bool(record.is_current), record.created_at)
        if column in building.cells and building.cells[column][0] >= rank:
            continue  # a current grading wins, then the newest
        cell = EvaluationCell(
            grading_id=record.id,
            verdict=_verdict(record.status, record.passed, record.held),
            yes_count=record.yes_count,
        )
        building.cells[column] = (rank, cell)
    disagreeing = sum(building.disagrees() for building in rows.values())
    chosen = [
        (key, building)
        for key, building in rows.items()
        if building.disagrees() or not disagreeing_only
    ]
    kept = chosen[:MAX_ROWS]  # the newest attempts
    table_rows = [building.row(key) for key, building in kept]
    table_rows.sort(key=lambda r: (r.scenario_id or "", r.agent or "", r.attempt or 0, r.key))
    columns = {column for building in rows.values() for column in building.cells}
    return EvaluationTable(
        columns_by=by,
        columns=sorted(columns),
        rows=table_rows,
        disagreeing=disagreeing,
        disagreeing_only=disagreeing_only,
        truncated=len(chosen) > len(kept),
    )


def table_filter(filters: ReportFilter) -> ReportFilter:
    """The filter the table counts: ``filters`` with shadow regrades included unless it
    says otherwise (comparing a judge's shadow regrade is what the table is for)."""
    return replace(filters, include="shadow") if filters.include is None else filters


async def evaluation_table(
    store: Store, filters: ReportFilter, *, by: ColumnKind, disagreeing_only: bool = False
) -> EvaluationTable:
    """The table of the gradings ``filters`` covers (:func:`table_filter`: shadow regrades
    included unless the filter says otherwise), read in one snapshot."""
    return await store.db.run_read(_read, table_filter(filters), by, disagreeing_only)


def evaluation_csv(table: EvaluationTable) -> str:
    """The table as CSV: the attempt's fields, then per column its verdict and yes count,
    then whether the row disagrees."""
    out = io.StringIO()
    writer = csv.writer(out)
    head = ["agent", "model", "scenario_id", "run_id", "attempt"]
    writer.writerow(inert_cells(
        [*head, *(f"{c} {part}" for c in table.columns for part in ("verdict", "yes")),
         "disagree"]
    ))  # fmt: skip
    for row in table.rows:
        cells: list[object] = []
        for column in table.columns:
            cell = row.cells.get(column)
            cells += ["", ""] if cell is None else [cell.verdict, cell.yes_count]
        writer.writerow(inert_cells(
            [row.agent, row.model, row.scenario_id, row.run_id, row.attempt, *cells,
             "yes" if row.disagree else "no"]
        ))  # fmt: skip
    return out.getvalue()


def evaluation_csv_headers(table: EvaluationTable) -> dict[str, str]:
    """What the CSV cannot say in its rows: how many it holds (``X-Table-Rows``) and
    whether attempts were left out past ``MAX_ROWS`` (``X-Table-Truncated``), as the
    JSON table's ``truncated`` says."""
    return {
        "X-Table-Rows": str(len(table.rows)),
        "X-Table-Truncated": "true" if table.truncated else "false",
    }
