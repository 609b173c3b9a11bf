"""What commands write: a report as a table, CSV or JSON."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["echo_json", "emit", "print_tables"]

Command = Callable[..., Any]


def echo_json(data: Any, *, indent: int | None = None) -> None:
    """Print JSON-ready ``data`` as JSON on stdout: printable text raw, what a terminal
    would act on (C1 controls, bidirectional overrides) or read as a line's end (U+2028,
    U+2029) as ``\\u`` escapes; it parses to the same values."""
    from api.terminal import inert_json

    click.echo(inert_json(json.dumps(data, indent=indent, ensure_ascii=False)))


def emit(report: BaseModel | Any, table: Any, fmt: str) -> None:
    """Print a report (a model or JSON-ready data) as a rich table, CSV or JSON on stdout."""
    from api.tabular import write_csv

    if fmt == "json":
        data = report.model_dump(mode="json") if hasattr(report, "model_dump") else report
        echo_json(data, indent=2)
    elif fmt == "csv":
        write_csv(table, sys.stdout)
    else:
        print_tables([table])


def print_tables(tables: Sequence[Any]) -> None:
    """Print tables (:class:`api.tabular.Tabular`) on stdout, a blank line between them,
    kept to the terminal's width (160 columns when piped, unless ``COLUMNS`` says)."""
    from rich.console import Console

    from api.tabular import print_table

    console = Console()
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=160)  # piped: do not squeeze the table to 80 columns
    for number, table in enumerate(tables):
        if number:
            console.print()
        print_table(table, console)
