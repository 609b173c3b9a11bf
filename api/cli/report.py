"""``sre-judge report ...``: figures from the database, or from a server with ``--server``.

Every figure comes with its n and a 95% interval: tables in the terminal,
``--format csv|json`` for scripts, ``--chart FILE.png|svg`` for a picture.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import with_store
from api.cli.options import (
    build_filter,
    chart_option,
    emit,
    filter_options,
    format_option,
    output_options,
    parse_arm,
    parse_group_by,
    server_option,
    write_chart,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from storage import Store
    from storage.report_queries import Verdicts

__all__ = ["REPORT_ALIASES", "fetch_report", "report_command"]

#: the report and export commands' old filter names, kept as hidden deprecated aliases
REPORT_ALIASES = {"--rubric": "rubric", "--judge": "judge"}

PASS_RATE_AXIS = "pass rate (error bars: 95% Wilson interval)"
YES_RATE_AXIS = "yes rate (error bars: 95% Wilson interval)"

_GROUP_BY = click.option(
    "--group-by",
    default="",
    metavar="KEYS",
    help="comma-separated among agent, model, scenario, rubric, judge",
)


def fetch_report(
    server: str | None,
    model: type[BaseModel],
    path: str,
    params: dict[str, Any],
    local: Callable[[Store], Any],
) -> Any:
    """The report from the server at ``server`` (read into ``model``) or from the database."""
    if server is None:
        return with_store(local)
    from api.cli.remote import query_params, remote

    with remote(server) as client:
        return model.model_validate(client.get_json(path, query_params(params)))


def _label(key: dict[str, str | None]) -> str:
    return " / ".join(str(v) if v is not None else "-" for v in key.values()) or "all"


@click.group("report")
def report_command() -> None:
    """Pass rates, arm comparisons and breakdowns, each with n and a 95% interval.

    \b
    Example:
      sre-judge report pass-rates --group-by agent,model --created-after 2026-01-01
    """


@report_command.command("pass-rates")
@_GROUP_BY
@filter_options(aliases=REPORT_ALIASES)
@output_options
@chart_option
@server_option
def pass_rates(
    group_by: str,
    fmt: str,
    verdicts: Verdicts,
    chart: Path | None,
    server: str | None,
    filters: dict[str, Any],
) -> None:
    """Pass rate per group with its Wilson 95% interval; unscored and pending apart.

    \b
    Example:
      sre-judge report pass-rates --group-by model --graded-judge openai:judge-b
    """
    from api.service.reports.charts import Bar
    from api.service.reports.models import PassRateReport
    from api.service.reports.rates import pass_rate_report
    from api.service.reports.tables import pass_rate_table

    keys = parse_group_by(group_by)
    params = {**filters, "group_by": ",".join(keys) or None, "verdicts": verdicts}
    report = fetch_report(
        server,
        PassRateReport,
        "/v1/stats/pass-rates",
        params,
        lambda store: pass_rate_report(
            store, build_filter(**filters), group_by=keys, verdicts=verdicts
        ),
    )
    emit(report, pass_rate_table(report), fmt)
    rates = report.groups or [report.overall]
    bars = [
        Bar(_label(g.key), g.passed, g.n, g.pass_rate, g.interval.low, g.interval.high)
        for g in rates
    ]
    write_chart(chart, bars, title=f"Pass rate ({verdicts} verdicts)", xlabel=PASS_RATE_AXIS)


@report_command.command("compare")
@click.option("-a", "arm_a", multiple=True, metavar="FIELD=VALUE", help="a filter of arm a")
@click.option("-b", "arm_b", multiple=True, metavar="FIELD=VALUE", help="a filter of arm b")
@output_options
@chart_option
@server_option
def compare(
    arm_a: Sequence[str],
    arm_b: Sequence[str],
    fmt: str,
    verdicts: Verdicts,
    chart: Path | None,
    server: str | None,
) -> None:
    """Arm a's pass rate minus arm b's: Newcombe 95% interval and Fisher's exact p.

    Arms are filters, e.g. -a model=x -b model=y (fields agent, model,
    scenario_id, run_id, rubric, judge, created_after, created_before). When a scenario
    was attempted several times, the comparison is repeated with scenarios as the unit.

    \b
    Example:
      sre-judge report compare -a judge=external:sregym -b judge=openai:judge-b
    """
    from dataclasses import asdict

    from api.service.reports.charts import Bar
    from api.service.reports.models import ComparisonReport
    from api.service.reports.rates import comparison_report
    from api.service.reports.tables import comparison_table

    a, b = parse_arm(arm_a, "a"), parse_arm(arm_b, "b")
    params: dict[str, Any] = {"verdicts": verdicts}
    for name, arm in (("a", a), ("b", b)):
        fields = {k: v for k, v in asdict(arm).items() if k != "current_only"}
        params.update({f"{name}.{k}": v for k, v in fields.items()})
    report = fetch_report(
        server,
        ComparisonReport,
        "/v1/stats/compare",
        params,
        lambda store: comparison_report(store, a, b, verdicts=verdicts),
    )
    emit(report, comparison_table(report), fmt)
    bars = []
    for name, arm in (("a", report.a), ("b", report.b)):
        label = f"{name}: " + ", ".join(f"{k}={v}" for k, v in arm.filters.items())
        o = arm.outcome
        bars.append(Bar(label, o.passed, o.n, o.pass_rate, o.interval.low, o.interval.high))
    write_chart(chart, bars, title=f"Pass rate ({verdicts} verdicts)", xlabel=PASS_RATE_AXIS)


@report_command.command("questions")
@_GROUP_BY
@filter_options(aliases=REPORT_ALIASES)
@output_options
@chart_option
@server_option
def questions(
    group_by: str,
    fmt: str,
    verdicts: Verdicts,
    chart: Path | None,
    server: str | None,
    filters: dict[str, Any],
) -> None:
    """Yes rate of every question with its Wilson 95% interval.

    \b
    Example:
      sre-judge report questions --agent my-agent --format csv
    """
    from api.service.reports.charts import Bar
    from api.service.reports.models import QuestionReport
    from api.service.reports.rates import question_report
    from api.service.reports.tables import question_table

    keys = parse_group_by(group_by)
    params = {**filters, "group_by": ",".join(keys) or None, "verdicts": verdicts}
    report = fetch_report(
        server,
        QuestionReport,
        "/v1/stats/questions",
        params,
        lambda store: question_report(
            store, build_filter(**filters), group_by=keys, verdicts=verdicts
        ),
    )
    emit(report, question_table(report), fmt)
    bars = [
        Bar(
            " / ".join([*(str(v) for v in q.key.values()), q.question_id]),
            q.yes,
            q.n,
            q.yes_rate,
            q.interval.low,
            q.interval.high,
        )
        for q in report.questions
    ]
    write_chart(chart, bars, title=f"Yes rate per question ({verdicts})", xlabel=YES_RATE_AXIS)


@report_command.command("dimensions")
@_GROUP_BY
@filter_options(aliases=REPORT_ALIASES)
@output_options
@server_option
def dimensions(
    group_by: str, fmt: str, verdicts: Verdicts, server: str | None, filters: dict[str, Any]
) -> None:
    """Among failed diagnoses: how often each dimension had no yes, or the fewest.

    \b
    Example:
      sre-judge report dimensions --group-by agent
    """
    from api.service.reports.models import DimensionReport
    from api.service.reports.rates import dimension_report
    from api.service.reports.tables import dimension_table

    keys = parse_group_by(group_by)
    params = {**filters, "group_by": ",".join(keys) or None, "verdicts": verdicts}
    report = fetch_report(
        server,
        DimensionReport,
        "/v1/stats/dimensions",
        params,
        lambda store: dimension_report(
            store, build_filter(**filters), group_by=keys, verdicts=verdicts
        ),
    )
    emit(report, dimension_table(report), fmt)


@report_command.command("tags")
@_GROUP_BY
@filter_options(aliases=REPORT_ALIASES)
@format_option()
@server_option
def tags(group_by: str, fmt: str, server: str | None, filters: dict[str, Any]) -> None:
    """Failure tags in force, most frequent first, as a share of scored gradings.

    \b
    Example:
      sre-judge report tags --group-by model --format json
    """
    from api.service.reports.models import TagReport
    from api.service.reports.rates import tag_report
    from api.service.reports.tables import tag_table

    keys = parse_group_by(group_by)
    params = {**filters, "group_by": ",".join(keys) or None}
    report = fetch_report(
        server,
        TagReport,
        "/v1/stats/failure-tags",
        params,
        lambda store: tag_report(store, build_filter(**filters), group_by=keys),
    )
    emit(report, tag_table(report), fmt)
