"""What the report and export commands share: the store, filter and output options.

The commands read the database of ``SRE_JUDGE_DATABASE_URL`` directly (no server
needed). scipy and matplotlib are imported only when a command runs.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # storage, scipy and the like are imported when a command runs
    from pydantic import BaseModel

    from storage.report_queries import GroupKey, ReportFilter

__all__ = [
    "build_filter",
    "chart_option",
    "emit",
    "filter_options",
    "output_options",
    "parse_arm",
    "parse_group_by",
    "write_chart",
]

Command = Callable[..., Any]


def filter_options(command: Command) -> Command:
    """The filter options shared by every report and the export."""
    options = [
        click.option("--agent", help="only this agent"),
        click.option("--model", help="only this model"),
        click.option("--scenario", "scenario_id", help="only this scenario id"),
        click.option("--run", "run_id", help="only this run id"),
        click.option("--rubric", help="rubric id or id@version"),
        click.option("--judge", help="judge model or backend:model"),
        click.option("--created-after", type=click.DateTime(), help="graded on or after (UTC)"),
        click.option("--created-before", type=click.DateTime(), help="graded before (UTC)"),
        click.option(
            "--ground-truth-source",
            type=click.Choice(["scenario", "inline"]),
            help="only registered scenarios' ground truths (scenario) or submitters' (inline)",
        ),
        click.option("--scenario-set", help="only scenarios of this set, e.g. held-out"),
        click.option(
            "--include",
            type=click.Choice(["shadow"]),
            help="also the gradings of shadow regrades (newest per submission and judge)",
        ),
        click.option(
            "--provisional",
            type=click.Choice(["include", "exclude", "only"]),
            help="gradings of judges not yet qualified: counted and marked (default), "
            "left out, or alone",
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def build_filter(**options: Any) -> ReportFilter:
    """A report filter from the filter options (naive times are UTC)."""
    from storage.report_queries import ReportFilter

    for name in ("created_after", "created_before"):
        options[name] = _utc(options.get(name))
    return ReportFilter(**options)


def parse_group_by(value: str) -> list[GroupKey]:
    """``agent,model`` -> the group keys; a usage error names the bad one."""
    from storage.report_queries import GROUP_KEYS

    names = [part.strip() for part in value.split(",") if part.strip()]
    for name in names:
        if name not in GROUP_KEYS:
            raise click.BadParameter(
                f"{name!r} is not one of {', '.join(GROUP_KEYS)}", param_hint="--group-by"
            )
    return names  # type: ignore[return-value]


def parse_arm(pairs: Sequence[str], name: str) -> ReportFilter:
    """``-a agent=x -a model=y`` -> the arm's filter."""
    from api.service.reports.models import ARM_FIELDS

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = {"scenario": "scenario_id", "run": "run_id"}.get(key.strip(), key.strip())
        if not sep or key not in ARM_FIELDS or not value:
            raise click.BadParameter(
                f"{pair!r}: expected FIELD=VALUE with FIELD among {', '.join(ARM_FIELDS)}",
                param_hint=f"-{name}",
            )
        values[key] = value
    if not values:
        raise click.BadParameter("give at least one FIELD=VALUE", param_hint=f"-{name}")
    return build_filter(**{k: _parse_time(k, v, name) for k, v in values.items()})


def _parse_time(key: str, value: str, name: str) -> Any:
    if not key.startswith("created_"):
        return value
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{key}: not an ISO time: {value!r}", param_hint=f"-{name}"
        ) from None


def output_options(command: Command) -> Command:
    """``--format`` and ``--verdicts``."""
    command = click.option(
        "--verdicts",
        type=click.Choice(["effective", "judge"]),
        default="effective",
        show_default=True,
        help="effective (after human overrides) or the judge's own",
    )(command)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "csv", "json"]),
        default="table",
        show_default=True,
    )(command)


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


def emit(report: BaseModel, table: Any, fmt: str) -> None:
    """Print a report as a rich table, CSV or JSON on stdout."""
    from rich.console import Console

    from api.service.reports.tables import print_table, write_csv

    if fmt == "json":
        click.echo(json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False))
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
