"""A titled table with notes, in one shape for the terminal (rich) and for CSV.

Every command that prints rows builds a :class:`Tabular`; :func:`print_table` shows it
in the terminal (floats with three decimals, a ``*ci_low``/``*ci_high`` pair as one
``low-high`` column), :func:`write_csv` writes it in full.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from typing import Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

__all__ = ["Tabular", "print_table", "write_csv"]


@dataclass
class Tabular:
    """A titled table with notes printed under it."""

    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)


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
