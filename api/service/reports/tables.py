"""Reports as tables: one shape for the terminal (rich) and for CSV.

Rates and interval ends print with three decimals in the terminal and in full in CSV;
every rate comes with its ``n`` and its 95% interval.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from api.service.reports.models import (
    ComparisonReport,
    DimensionReport,
    GroupRate,
    PassRateReport,
    QuestionReport,
    TagReport,
)
from judge.statistics import ArmDifference, ScenarioDifference

if TYPE_CHECKING:
    from api.service.attempts import AttemptReport

__all__ = [
    "Tabular",
    "attempt_table",
    "comparison_table",
    "dimension_table",
    "pass_rate_table",
    "print_table",
    "question_table",
    "tag_table",
    "write_csv",
]

_COUNTS = ["n", "passed", "failed", "unscored", "pending", "held", "provisional", "inline"]


@dataclass
class Tabular:
    """A titled table with notes printed under it."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)


def _key_cells(group_by: Sequence[str], key: dict[str, str | None]) -> list[Any]:
    return [key.get(name) for name in group_by]


def _rate_cells(rate: GroupRate) -> list[Any]:
    return [
        rate.n,
        rate.passed,
        rate.failed,
        rate.unscored,
        rate.pending,
        rate.held,
        rate.provisional,
        rate.inline,
        rate.pass_rate,
        rate.interval.low,
        rate.interval.high,
    ]


def pass_rate_table(report: PassRateReport) -> Tabular:
    """Groups, then the overall row."""
    group_by = list(report.group_by)
    rows = [[*_key_cells(group_by, g.key), *_rate_cells(g)] for g in report.groups]
    overall = ["(all)"] + [None] * (len(group_by) - 1) if group_by else []
    rows.append([*overall, *_rate_cells(report.overall)])
    return Tabular(
        title=f"Pass rates ({report.verdicts} verdicts)",
        columns=[*group_by, *_COUNTS, "pass_rate", "ci_low", "ci_high"],
        rows=rows,
        notes=[
            *report.scope,
            "n = passed + failed; unscored, pending and held (a pass waiting for a human "
            "verdict: an injection signal, or a judge not yet qualified) are counted apart; "
            "provisional: of all gradings, those by a judge not yet qualified; inline: "
            "gradings against their submitters' own ground truths, counted apart unless "
            "inline=include",
        ],
    )


def _difference_row(label: str, diff: ArmDifference | ScenarioDifference) -> list[Any]:
    interval = diff.interval
    return [
        label,
        *([None] * len(_COUNTS)),
        diff.estimate,
        interval.low if interval else None,
        interval.high if interval else None,
        diff.p_value,
    ]


def comparison_table(report: ComparisonReport) -> Tabular:
    """Both arms, the difference with attempts as the unit, and with scenarios if needed."""
    rows = [
        [name, *_rate_cells(arm.outcome), None] for name, arm in (("a", report.a), ("b", report.b))
    ]
    rows.append(_difference_row("a - b", report.difference))
    notes = [
        report.definitions,
        *(
            f"{name}: {line}"
            for name, arm in (("a", report.a), ("b", report.b))
            for line in arm.scope
        ),
        "a - b: Newcombe 95% interval, Fisher's exact p-value",
    ]
    if report.by_scenario is not None:
        rows.append(_difference_row("a - b (by scenario)", report.by_scenario))
        test = f" ({report.by_scenario.test})" if report.by_scenario.test else ""
        notes.append(f"by scenario{test}: {report.by_scenario.note}")
    if report.note:
        notes.append(report.note)
    return Tabular(
        title=f"Comparison ({report.verdicts} verdicts)",
        columns=["arm", *_COUNTS, "rate", "ci_low", "ci_high", "p_value"],
        rows=rows,
        notes=notes,
    )


def question_table(report: QuestionReport) -> Tabular:
    """Yes rate per question."""
    group_by = list(report.group_by)
    rows = [
        [
            *_key_cells(group_by, q.key),
            q.question_id,
            q.dimension_id,
            q.n,
            q.yes,
            q.yes_rate,
            q.interval.low,
            q.interval.high,
        ]
        for q in report.questions
    ]
    return Tabular(
        title=f"Yes rate per question ({report.verdicts} answers)",
        columns=[*group_by, "question", "dimension", "n", "yes", "yes_rate", "ci_low", "ci_high"],
        rows=rows,
        notes=report.scope,
    )


def dimension_table(report: DimensionReport) -> Tabular:
    """Per dimension, among failed diagnoses: no yes at all, or the fewest yes."""
    group_by = list(report.group_by)
    rows = [
        [
            *_key_cells(group_by, d.key),
            d.dimension_id,
            d.failing,
            d.zero_yes.successes,
            d.zero_yes.rate,
            d.zero_yes.interval.low,
            d.zero_yes.interval.high,
            d.weakest.successes,
            d.weakest.rate,
            d.weakest.interval.low,
            d.weakest.interval.high,
        ]
        for d in report.dimensions
    ]
    columns = ["dimension", "failing", "no_yes", "no_yes_rate", "ci_low", "ci_high"]
    columns += ["weakest", "weakest_rate", "weakest_ci_low", "weakest_ci_high"]
    return Tabular(
        title=f"Dimensions of failed diagnoses ({report.verdicts} verdicts)",
        columns=[*group_by, *columns],
        rows=rows,
        notes=[
            *report.scope,
            "no_yes: the dimension had no yes (the rule fails it); weakest: fewest yes",
        ],
    )


def tag_table(report: TagReport) -> Tabular:
    """Failure tags, most frequent first."""
    group_by = list(report.group_by)
    rows = [
        [
            *_key_cells(group_by, t.key),
            t.tag,
            t.tagged,
            t.n,
            t.rate,
            t.interval.low,
            t.interval.high,
        ]
        for t in report.tags
    ]
    return Tabular(
        title="Failure tags",
        columns=[*group_by, "tag", "tagged", "n", "rate", "ci_low", "ci_high"],
        rows=rows,
        notes=[*report.scope, "n = scored gradings (graded or unscored) in the filter"],
    )


def attempt_table(report: AttemptReport) -> Tabular:
    """Attempts per submitter token and registered scenario, most first."""
    rows = [
        [
            i.token_name or i.token_id,
            i.role,
            i.scenario_id,
            i.attempts,
            i.first_at.isoformat(),
            i.last_at.isoformat(),
        ]
        for i in report.items
    ]
    limit = report.limit_per_hour
    return Tabular(
        title="Attempts per token and scenario",
        columns=["token", "role", "scenario", "attempts", "first_at", "last_at"],
        rows=rows,
        notes=[
            f"since {report.since.isoformat()}",
            f"limit: {limit} a scenario per token per hour" if limit else "limit: off",
        ],
    )


def _cell(column: str, value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if column == "p_value" else f"{value:.3f}"
    return str(value)


def _terminal_columns(columns: list[str]) -> list[tuple[str, list[int]]]:
    """Header and source columns; each ``*ci_low``/``*ci_high`` pair merges into one."""
    merged: list[tuple[str, list[int]]] = []
    for i, column in enumerate(columns):
        if column.endswith("ci_high") and merged and columns[i - 1].endswith("ci_low"):
            prefix = column.removesuffix("ci_high")
            merged[-1] = (f"{prefix.replace('_', ' ')}95% CI", [i - 1, i])
        else:
            merged.append((column, [i]))
    return merged


def print_table(table: Tabular, console: Console) -> None:
    """The table in the terminal, intervals as ``low-high``, then its notes."""
    view = Table(title=table.title, title_justify="left", box=box.SIMPLE_HEAD)
    layout = _terminal_columns(table.columns)
    for header, sources in layout:
        numeric = any(isinstance(row[sources[0]], int | float) for row in table.rows)
        view.add_column(
            header,
            justify="right" if numeric else "left",
            no_wrap=numeric,
            min_width=min(len(header), 14),
        )
    for row in table.rows:
        cells = []
        for _, sources in layout:
            parts = [_cell(table.columns[i], row[i]) for i in sources]
            cells.append("-" if set(parts) == {"-"} else "–".join(parts))
        view.add_row(*cells)
    console.print(view)
    if not table.rows:
        console.print("(no rows: nothing matches the filter)")
    for note in table.notes:
        console.print(f"note: {note}", markup=False, style="dim")


def write_csv(table: Tabular, stream: TextIO) -> None:
    """The table as CSV with a header row; empty cells for missing values."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(table.columns)
    writer.writerows(table.rows)
