"""What commands write: a report as a table, CSV or JSON."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["emit"]

Command = Callable[..., Any]


def emit(report: BaseModel | Any, table: Any, fmt: str) -> None:
    """Print a report (a model or JSON-ready data) as a rich table, CSV or JSON on stdout."""
    from rich.console import Console

    from api.tabular import print_table, write_csv

    if fmt == "json":
        data = report.model_dump(mode="json") if hasattr(report, "model_dump") else report
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        write_csv(table, sys.stdout)
    else:
        console = Console()
        if not console.is_terminal and "COLUMNS" not in os.environ:
            console = Console(width=160)  # piped: do not squeeze the table to 80 columns
        print_table(table, console)
