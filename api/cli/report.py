"""``sre-judge report ...`` and ``sre-judge export``: figures and exports from the database.

Every figure comes with its n and a 95% interval: tables in the terminal,
``--format csv|json`` for scripts, ``--chart FILE.png|svg`` for a picture.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import with_store
from api.cli.options import (
    build_filter,
    chart_option,
    emit,
    filter_options,
    output_options,
    parse_arm,
    parse_group_by,
    write_chart,
)

if TYPE_CHECKING:
    from api.service.reports.export_writer import ExportSummary
    from api.service.reports.exports import ExportFormat
    from storage import Store
    from storage.report_queries import ReportFilter, Verdicts

__all__ = ["export_command", "report_command"]

PASS_RATE_AXIS = "pass rate (error bars: 95% Wilson interval)"
YES_RATE_AXIS = "yes rate (error bars: 95% Wilson interval)"

_GROUP_BY = click.option(
    "--group-by",
    default="",
    metavar="KEYS",
    help="comma-separated among agent, model, scenario, rubric, judge, source, provisional",
)


@click.group("report")
def report_command() -> None:
    """Pass rates, arm comparisons and breakdowns, each with n and a 95% interval."""


@report_command.command("pass-rates")
@_GROUP_BY
@filter_options
@output_options
@chart_option
def pass_rates(
    group_by: str, fmt: str, verdicts: Verdicts, chart: Path | None, **filters: Any
) -> None:
    """Pass rate per group with its Wilson 95% interval; unscored and pending apart."""
    from api.service.reports.charts import rate_bars
    from api.service.reports.rates import pass_rate_report
    from api.service.reports.tables import pass_rate_table

    keys = parse_group_by(group_by)
    report = with_store(
        lambda store: pass_rate_report(
            store, build_filter(**filters), group_by=keys, verdicts=verdicts
        )
    )
    emit(report, pass_rate_table(report), fmt)
    bars = rate_bars(report.groups or [report.overall])
    write_chart(
        chart,
        bars,
        title=f"Pass rate ({verdicts} verdicts)",
        xlabel=PASS_RATE_AXIS,
        scope=report.scope,
    )


@report_command.command("compare")
@click.option("-a", "arm_a", multiple=True, metavar="FIELD=VALUE", help="a filter of arm a")
@click.option("-b", "arm_b", multiple=True, metavar="FIELD=VALUE", help="a filter of arm b")
@click.option(
    "--include",
    type=click.Choice(["shadow"]),
    help="both arms also count shadow-regrade gradings (an arm's own include=... wins)",
)
@output_options
@chart_option
def compare(
    arm_a: Sequence[str],
    arm_b: Sequence[str],
    include: str | None,
    fmt: str,
    verdicts: Verdicts,
    chart: Path | None,
) -> None:
    """Arm a's pass rate minus arm b's: Newcombe 95% interval and Fisher's exact p.

    Arms are filters (-a model=x -b model=y; any report filter, plus include and
    provisional). Repeated scenarios are also compared with scenarios as the unit. An
    arm with no passed or failed grading is an error (exit 2). SREGym's judge against
    a shadow regrade by a new judge:

        sre-judge report compare -a judge=external:sregym -b judge=openai:new --include shadow
    """
    from api.service.reports.charts import comparison_chart
    from api.service.reports.rates import comparison_report
    from api.service.reports.tables import comparison_table

    a, b = (
        parse_arm(arm, name) if include is None else _with_include(parse_arm(arm, name), include)
        for arm, name in ((arm_a, "a"), (arm_b, "b"))
    )
    report = with_store(lambda store: comparison_report(store, a, b, verdicts=verdicts))
    emit(report, comparison_table(report), fmt)
    differences, scope = comparison_chart(report)
    write_chart(
        chart,
        differences,
        title=f"Pass rate of a minus b ({verdicts} verdicts)",
        xlabel="",
        scope=scope,
    )


def _with_include(arm: ReportFilter, include: str) -> ReportFilter:
    return arm if arm.include is not None else replace(arm, include=include)  # type: ignore[arg-type]


@report_command.command("questions")
@_GROUP_BY
@filter_options
@output_options
@chart_option
def questions(
    group_by: str, fmt: str, verdicts: Verdicts, chart: Path | None, **filters: Any
) -> None:
    """Yes rate of every question with its Wilson 95% interval."""
    from api.service.reports.charts import question_bars
    from api.service.reports.rates import question_report
    from api.service.reports.tables import question_table

    keys = parse_group_by(group_by)
    report = with_store(
        lambda store: question_report(
            store, build_filter(**filters), group_by=keys, verdicts=verdicts
        )
    )
    emit(report, question_table(report), fmt)
    bars = question_bars(report.questions)
    write_chart(
        chart,
        bars,
        title=f"Yes rate per question ({verdicts} answers)",
        xlabel=YES_RATE_AXIS,
        scope=report.scope,
    )


@report_command.command("dimensions")
@_GROUP_BY
@filter_options
@output_options
def dimensions(group_by: str, fmt: str, verdicts: Verdicts, **filters: Any) -> None:
    """Among failed diagnoses: how often each dimension had no yes, or the fewest."""
    from api.service.reports.rates import dimension_report
    from api.service.reports.tables import dimension_table

    keys = parse_group_by(group_by)
    report = with_store(
        lambda store: dimension_report(
            store, build_filter(**filters), group_by=keys, verdicts=verdicts
        )
    )
    emit(report, dimension_table(report), fmt)


@report_command.command("tags")
@_GROUP_BY
@filter_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
def tags(group_by: str, fmt: str, **filters: Any) -> None:
    """Failure tags in force, most frequent first, as a share of scored gradings."""
    from api.service.reports.rates import tag_report
    from api.service.reports.tables import tag_table

    keys = parse_group_by(group_by)
    report = with_store(lambda store: tag_report(store, build_filter(**filters), group_by=keys))
    emit(report, tag_table(report), fmt)


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "sregym"]), required=True)
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    help="write to this file (default: stdout); with --layout folder, this folder",
)
@click.option(
    "--layout",
    type=click.Choice(["file", "folder"]),
    help="with --format sregym: imported SREGym rows as SREGym wrote them, one CSV or its folder",
)
@click.option("--include-superseded", is_flag=True, help="also gradings replaced by a regrade")
@filter_options
def export_command(
    fmt: ExportFormat,
    output: Path | None,
    layout: str | None,
    include_superseded: bool,
    **filters: Any,
) -> None:
    """Every grading in the filter as JSONL, CSV or SREGym's results CSV.

    All or nothing: the export is written whole (to a temporary file beside --output,
    renamed into place; for stdout, spooled first) before anyone can read it. If it fails,
    nothing is written, an existing --output file is left as it was, and the exit status
    is 1. On success, stderr gives the gradings exported and the SHA-256 of the bytes.

    --format sregym --layout folder|file gives imported SREGym attempts back as SREGym
    wrote them: sre-judge export --format sregym --layout folder -o results-again/
    """
    from api.cli.atomic import replace_atomically
    from api.cli.sregym_export import export_sregym_layout
    from api.service.reports.export_writer import ExportFailed, spool, write_export

    report_filter = replace(build_filter(**filters), current_only=not include_superseded)
    if layout is not None:
        return export_sregym_layout(fmt, layout, output, report_filter)
    if output is not None and output.is_dir():
        raise click.UsageError(f"--output: {output} is a folder")
    where = f" to {output}" if output else ""

    async def work(store: Store) -> ExportSummary:
        if output is not None:
            with replace_atomically(output) as file:
                return await write_export(store, report_filter, fmt, file)
        with spool() as spooled:
            summary = await write_export(store, report_filter, fmt, spooled)
            spooled.seek(0)
            shutil.copyfileobj(spooled, click.get_binary_stream("stdout"))
        return summary

    try:
        summary = with_store(work)
    except ExportFailed as exc:
        kept = f"{output} is unchanged" if output else "nothing was written"
        raise click.ClickException(
            f"export failed after {exc.rows} gradings ({exc.reason}); {kept}"
        ) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the export{where}: {exc}") from None
    click.echo(f"{summary.rows} gradings exported{where} (sha256 {summary.sha256_hex})", err=True)


@report_command.command("agreement")
@click.option(
    "--kind",
    default="",
    metavar="KINDS",
    help="comma-separated among judge_human, judge_judge, human_human (default all)",
)
@click.option(
    "--group-by", default="", metavar="KEYS", help="comma-separated: rubric, judge, provisional"
)
@click.option(
    "--source",
    type=click.Choice(["all", "blind", "override"]),
    default="all",
    show_default=True,
    help="which human labels count",
)
@filter_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "csv", "json"]),
    default="table",
    show_default=True,
)
def agreement(kind: str, group_by: str, source: str, fmt: str, **filters: Any) -> None:
    """Judge vs human labels, judge vs judge, human vs human: kappa with its 95% CI."""
    from api.service.reports.agreement import agreement_table, build_agreement_report
    from storage.agreement import AGREEMENT_GROUPS, AGREEMENT_KINDS

    def names(value: str, known: tuple[str, ...], hint: str) -> list[Any]:
        found = [p.strip() for p in value.split(",") if p.strip()]
        for name in found:
            if name not in known:
                raise click.BadParameter(
                    f"{name!r} is not one of {', '.join(known)}", param_hint=hint
                )
        return found

    kinds = names(kind, AGREEMENT_KINDS, "--kind") or list(AGREEMENT_KINDS)
    groups = names(group_by, AGREEMENT_GROUPS, "--group-by")
    report = with_store(
        lambda store: build_agreement_report(
            store,
            build_filter(**filters),
            kinds=kinds,
            group_by=groups,
            source=source,  # type: ignore[arg-type]
        )
    )
    emit(report, agreement_table(report), fmt)
