"""What report commands write: a report as a table, CSV or JSON, and its chart."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["chart_option", "emit", "write_chart"]

Command = Callable[..., Any]


def _chart_path(_ctx: click.Context, _param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None and value.suffix.lower() not in (".png", ".svg"):
        raise click.BadParameter(f"{value}: a chart is written as .png or .svg")
    return value


def chart_option(command: Command) -> Command:
    """``--chart FILE.png|svg``, checked before any work is done."""
    return click.option(
        "--chart",
        type=click.Path(dir_okay=False, path_type=Path),
        callback=_chart_path,
        help="also write a chart of the rates with their intervals (.png or .svg)",
    )(command)


def emit(report: BaseModel | Any, table: Any, fmt: str) -> None:
    """Print a report (a model or JSON-ready data) as a rich table, CSV or JSON on stdout."""
    from rich.console import Console

    from api.service.reports.tables import print_table, write_csv

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


def write_chart(
    path: Path | None, bars: Any, *, title: str, xlabel: str, scope: Sequence[str] = ()
) -> None:
    """Write the chart if one was asked for; usage errors for a bad suffix or no matplotlib.

    ``bars`` are rates (``Bar``) or differences (``Difference``); ``scope`` goes under
    the title (filter, verdicts, judge, gradings, provisional).
    """
    if path is None:
        return
    from api.service.reports.charts import (
        ChartUnavailable,
        Difference,
        write_difference_chart,
        write_interval_chart,
    )

    try:
        if bars and isinstance(bars[0], Difference):
            write_difference_chart(bars, path, title=title, scope=scope)
        else:
            write_interval_chart(bars, path, title=title, xlabel=xlabel, scope=scope)
    except (ValueError, ChartUnavailable) as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(f"chart written to {path}", err=True)
