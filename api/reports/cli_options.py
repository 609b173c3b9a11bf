"""The report commands' own options: arms, grouping, verdicts and charts.

Checked before any work is done, each as a usage error naming the option at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin, get_type_hints

import click

from api.cli.options import Instant, as_utc, format_option

if TYPE_CHECKING:
    from api.reports.filters import GroupKey, ReportFilter

__all__ = [
    "build_filter",
    "chart_option",
    "output_options",
    "parse_arm",
    "parse_group_by",
    "write_chart",
]

Command = Callable[..., Any]


def build_filter(**options: Any) -> ReportFilter:
    """A report filter from the filter options (naive times are UTC)."""
    from api.reports.filters import ReportFilter

    for name in ("created_after", "created_before"):
        options[name] = as_utc(options.get(name))
    return ReportFilter(**options)


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


def write_chart(
    path: Path | None, bars: Any, *, title: str, xlabel: str, scope: Sequence[str] = ()
) -> None:
    """Write the chart if one was asked for; usage errors for a bad suffix or no matplotlib.

    ``bars`` are rates (``Bar``) or differences (``Difference``); ``scope`` goes under
    the title (filter, verdicts, judge, gradings, provisional).
    """
    if path is None:
        return
    from api.reports.charts import (
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


def parse_names(value: str, known: Sequence[str], hint: str) -> list[str]:
    """``"agent, model,agent"`` -> ``["agent", "model"]``: each name once, in the order
    first given, as the routes read a comma-separated parameter
    (``api.reports.params.parse_comma_list``); a usage error naming ``hint`` for a name
    not among ``known``."""
    names = [part.strip() for part in value.split(",") if part.strip()]
    for name in names:
        if name not in known:
            raise click.BadParameter(f"{name!r} is not one of {', '.join(known)}", param_hint=hint)
    return list(dict.fromkeys(names))


def parse_group_by(value: str) -> list[GroupKey]:
    """``agent,model`` -> the group keys (:func:`parse_names`)."""
    from api.reports.filters import GROUP_KEYS

    return parse_names(value, GROUP_KEYS, "--group-by")  # type: ignore[return-value]


def parse_arm(pairs: Sequence[str], name: str) -> ReportFilter:
    """``-a agent=x -a model=y`` -> the arm's filter."""
    from api.reports.models import ARM_FIELDS

    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = {"scenario": "scenario_id", "run": "run_id"}.get(key.strip(), key.strip())
        if not sep or key not in ARM_FIELDS or not value:
            raise click.BadParameter(
                f"{pair!r}: expected FIELD=VALUE with FIELD among {', '.join(ARM_FIELDS)}",
                param_hint=f"-{name}",
            )
        choices = _choices(key)
        if choices and value not in choices:  # as the server refuses it
            raise click.BadParameter(
                f"{key}={value!r}: one of {', '.join(choices)}", param_hint=f"-{name}"
            )
        values[key] = value
    if not values:
        raise click.BadParameter("give at least one FIELD=VALUE", param_hint=f"-{name}")
    return build_filter(**{k: _parse_time(k, v, name) for k, v in values.items()})


def _choices(field: str) -> tuple[str, ...]:
    """The values a filter field takes when it is a choice (``include``, ``inline``...)."""
    from api.reports.filters import ReportFilter

    for kind in get_args(get_type_hints(ReportFilter)[field]) or ():
        if get_origin(kind) is Literal:
            return tuple(str(choice) for choice in get_args(kind))
    return ()


def _parse_time(key: str, value: str, name: str) -> Any:
    """An arm's ``created_*`` bound read as ``--created-after`` reads one (:class:`Instant`:
    UTC, kept within the stored years); any other field's value as given."""
    if not key.startswith("created_"):
        return value
    try:
        return Instant().convert(value, None, None)
    except click.BadParameter as exc:
        raise click.BadParameter(f"{key}: {exc.message}", param_hint=f"-{name}") from None


def output_options(command: Command) -> Command:
    """``--format`` and ``--verdicts``."""
    command = click.option(
        "--verdicts",
        type=click.Choice(["effective", "judge"]),
        default="effective",
        show_default=True,
        help="effective (after human overrides) or the judge's own",
    )(command)
    return format_option()(command)
