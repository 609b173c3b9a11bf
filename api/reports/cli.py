"""``sre-judge report ...``: figures from the database, or from a server with ``--server``.

Every figure comes with its n and a 95% interval: tables in the terminal,
``--format csv|json`` for scripts, ``--chart FILE.png|svg`` for a picture.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import with_store
from api.cli.options import (
    Instant,
    as_utc,
    emit,
    filter_options,
    format_option,
    server_option,
)
from api.reports.cli_options import (
    build_filter,
    chart_option,
    output_options,
    parse_arm,
    parse_group_by,
    write_chart,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from api.reports.filters import ReportFilter, Verdicts
    from judge.rubric import Rubric
    from storage import Store

__all__ = ["REPORT_ALIASES", "current_rubrics", "fetch_report", "report_command"]

#: the report and export commands' old filter names, kept as hidden deprecated aliases
REPORT_ALIASES = {"--rubric": "rubric", "--judge": "judge"}

PASS_RATE_AXIS = "pass rate (error bars: 95% Wilson interval)"
YES_RATE_AXIS = "yes rate (error bars: 95% Wilson interval)"

_GROUP_BY = click.option(
    "--group-by",
    default="",
    metavar="KEYS",
    help=(
        "comma-separated among agent, model, scenario, rubric, judge, source, provisional, "
        "day, week"
    ),
)


def current_rubrics() -> dict[str, Rubric]:
    """The rubric files' current versions by id (``SRE_JUDGE_RUBRIC_DIR``), as the
    service reads them: a grading whose rubric version is not stored is read with its
    rubric's, as the service shows, exports and measures it."""
    from api.cli.edge import load_settings
    from judge.errors import RubricError
    from judge.rubric import load_rubric_dir

    try:
        return load_rubric_dir(load_settings().rubric_dir)
    except RubricError as exc:
        raise click.UsageError(f"SRE_JUDGE_RUBRIC_DIR: {exc}") from None


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


@click.group("report")
def report_command() -> None:
    """Pass rates, arm comparisons and breakdowns, each with n and a 95% interval.

    \b
    Example:
      sre-judge report pass-rates --group-by agent,model --created-after 2026-01-01
    """


@report_command.command("pass-rates")
@_GROUP_BY
@filter_options(aliases=REPORT_ALIASES, scope=True)
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
    from api.reports.charts import rate_bars
    from api.reports.models import PassRateReport
    from api.reports.rates import pass_rate_report
    from api.reports.tables import pass_rate_table

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
@server_option
def compare(
    arm_a: Sequence[str],
    arm_b: Sequence[str],
    include: str | None,
    fmt: str,
    verdicts: Verdicts,
    chart: Path | None,
    server: str | None,
) -> None:
    """Arm a's pass rate minus arm b's, with a 95% interval and an exact p-value.

    Arms are filters (-a model=x -b model=y; any report filter, plus include and
    provisional). Arms that graded the same attempts (two judges, two rubric versions)
    are compared paired: McNemar's exact test and Newcombe's paired interval; others
    with Fisher's exact test and Newcombe's interval for independent rates. The table's
    test column says which. Repeated scenarios are also compared with scenarios as the
    unit. An arm with no passed or failed grading is an error (exit 2).

    \b
    Example: SREGym's judge against a shadow regrade by a new judge
      sre-judge report compare -a judge=external:sregym -b judge=openai:new --include shadow
    """
    from api.reports.charts import comparison_chart
    from api.reports.models import ARM_FIELDS, ComparisonReport
    from api.reports.rates import comparison_report
    from api.reports.tables import comparison_table

    a, b = (
        parse_arm(arm, name) if include is None else _with_include(parse_arm(arm, name), include)
        for arm, name in ((arm_a, "a"), (arm_b, "b"))
    )
    params: dict[str, Any] = {"verdicts": verdicts}
    for name, arm in (("a", a), ("b", b)):  # the fields the server's arms take; None are left out
        params.update({f"{name}.{k}": getattr(arm, k) for k in ARM_FIELDS})
    report = fetch_report(
        server,
        ComparisonReport,
        "/v1/stats/compare",
        params,
        lambda store: comparison_report(store, a, b, verdicts=verdicts),
    )
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
    from dataclasses import replace

    return arm if arm.include is not None else replace(arm, include=include)  # type: ignore[arg-type]


@report_command.command("questions")
@_GROUP_BY
@filter_options(aliases=REPORT_ALIASES, scope=True)
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
    from api.reports.charts import question_bars
    from api.reports.models import QuestionReport
    from api.reports.rates import question_report
    from api.reports.tables import question_table

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
@filter_options(aliases=REPORT_ALIASES, scope=True)
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
    from api.reports.models import DimensionReport
    from api.reports.rates import dimension_report
    from api.reports.tables import dimension_table

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
@filter_options(aliases=REPORT_ALIASES, scope=True)
@format_option()
@server_option
def tags(group_by: str, fmt: str, server: str | None, filters: dict[str, Any]) -> None:
    """Failure tags in force, most frequent first, as a share of scored gradings.

    \b
    Example:
      sre-judge report tags --group-by model --format json
    """
    from api.reports.models import TagReport
    from api.reports.rates import tag_report
    from api.reports.tables import tag_table

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


@report_command.command("attempts")
@click.option(
    "--created-after",
    type=Instant(),
    default=None,
    help="count attempts since then (default: the last hour, the limit's window)",
)
@click.option("--scenario", "scenario_id", default=None, help="one registered scenario")
@format_option()
@server_option
def attempts(
    created_after: datetime | None, scenario_id: str | None, fmt: str, server: str | None
) -> None:
    """Submissions of each submitter token per registered scenario, against the attempt
    limit (SRE_JUDGE_SUBMITTER_ATTEMPTS_PER_SCENARIO_PER_HOUR); most attempts first.
    Every pair of the period, read page by page.

    \b
    Example:
      sre-judge report attempts --created-after 2026-01-01 --format csv
    """
    from api.cli.edge import run, service_runtime
    from api.reports.tables import attempt_table
    from api.service.attempts import AttemptReport, attempt_report

    since = as_utc(created_after)
    pages: list[AttemptReport] = []
    if server is None:

        async def local() -> None:
            async with service_runtime(existing=True) as services:
                cursor: str | None = None
                while not pages or cursor:
                    page = await attempt_report(
                        services, since=since, scenario_id=scenario_id, cursor=cursor
                    )
                    pages.append(page)
                    cursor = page.next_cursor

        run(local())
    else:
        from api.cli.remote import query_params, remote

        params: dict[str, Any] = {"created_after": since, "scenario_id": scenario_id}
        with remote(server) as client:
            while not pages or params["cursor"]:
                data = client.get_json("/v1/stats/attempts", query_params(params))
                pages.append(AttemptReport.model_validate(data))
                params["cursor"] = pages[-1].next_cursor
    items = [item for page in pages for item in page.items]
    report = pages[0].model_copy(update={"items": items, "next_cursor": None})
    emit(report, attempt_table(report), fmt)
