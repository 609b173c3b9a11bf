"""The report pages: pass rates and question yes-rates, an arm comparison, judge-human
agreement; figures from the report services of ``/v1/stats``, drawn as SVG."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlencode

from litestar import Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromQuery
from litestar.response import Template

from api.reports.agreement import build_agreement_report
from api.reports.evaluation import (
    COLUMN_KINDS,
    ColumnKind,
    evaluation_csv,
    evaluation_csv_headers,
    evaluation_table,
    table_filter,
)
from api.reports.filter_scope import with_inline_default
from api.reports.filters import GROUP_KEYS, ReportFilter
from api.reports.models import GroupRate
from api.reports.page_view import (
    VERDICTS_TEXT,
    ChartRow,
    carried_filters,
    chart,
    describe_filter,
    gradings_link,
    label_of,
    page_filter,
    time_chart,
)
from api.reports.params import parse_group_by
from api.reports.rates import comparison_report, pass_rate_report, question_report
from api.reports.scope import gradings_text
from api.service.errors import InvalidRequest
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from judge.agreement import AgreementRow

__all__ = [
    "agreement_page",
    "compare_page",
    "evaluation_csv_page",
    "evaluation_page",
    "reports_page",
]

Verdicts = FromQuery[Literal["effective", "judge"]]


def _params(request: Request[Any, Any, Any]) -> dict[str, str]:
    return {k: v for k, v in request.query_params.items() if isinstance(v, str)}


def _rate_row(rate: GroupRate, filters: ReportFilter, label: str | None = None) -> ChartRow:
    return ChartRow(
        label=label or label_of(rate.key),
        successes=rate.passed,
        n=rate.n,
        rate=rate.pass_rate,
        low=rate.interval.low,
        high=rate.interval.high,
        href=gradings_link(filters, rate.key),
    )


@get("/reports", guards=[web_require("adjudicator")], include_in_schema=False)
async def reports_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    group_by: FromQuery[str | None] = "agent",
    verdicts: Verdicts = "effective",
    series: FromQuery[Literal["agent", "model"]] = "agent",
    over: FromQuery[Literal["week", "day"]] = "week",
) -> Template:
    """Pass rates overall and per group, each question's yes-rate, with 95% intervals, and
    the pass rate over time per agent or model (``series``) by week or day (``over``).

    How inline gradings count is settled once, from the page's ``group_by``, so that
    every chart counts what the page's scope lines say."""
    filters = page_filter(_params(request))
    groups = parse_group_by(group_by)
    filters = with_inline_default(filters, groups)
    store = services.store
    rates = await pass_rate_report(store, filters, group_by=groups, verdicts=verdicts)
    trend = await pass_rate_report(store, filters, group_by=[series, over], verdicts=verdicts)
    questions = await question_report(store, filters, verdicts=verdicts)
    rows = [_rate_row(rates.overall, filters, "all")]
    rows += [_rate_row(g, filters) for g in rates.groups]
    link = gradings_link(filters)
    q_rows = [
        ChartRow(q.question_id, q.yes, q.n, q.yes_rate, q.interval.low, q.interval.high, link)
        for q in questions.questions
    ]
    return page(
        "reports.html",
        who,
        rates=rates,
        rates_chart=chart(rows),
        questions_chart=chart(q_rows),
        time_chart_data=time_chart(trend.groups, series, over, filters),
        series=series,
        over=over,
        scope=describe_filter(filters),
        verdicts=verdicts,
        verdicts_text=VERDICTS_TEXT[verdicts],
        group_by=",".join(groups),
        group_keys=GROUP_KEYS,
        values=_params(request),
        carried=carried_filters(_params(request)),
        link=link,
    )


async def _per_scenario(
    services: Services, a: ReportFilter, b: ReportFilter, verdicts: Literal["effective", "judge"]
) -> list[tuple[str, GroupRate | None, GroupRate | None]]:
    """Each scenario's pass rate in either arm (the view behind ``by_scenario``)."""
    arms = [
        {label_of(g.key): g for g in (await pass_rate_report(
            services.store, f, group_by=["scenario"], verdicts=verdicts)).groups}
        for f in (a, b)
    ]  # fmt: skip
    names = sorted(set(arms[0]) | set(arms[1]))
    return [(name, arms[0].get(name), arms[1].get(name)) for name in names]


@get("/reports/compare", guards=[web_require("adjudicator")], include_in_schema=False)
async def compare_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    verdicts: Verdicts = "effective",
) -> Template:
    """Arm a's pass rate minus arm b's: the difference, its interval and p; per scenario
    when a scenario was attempted more than once."""
    params = _params(request)
    context: dict[str, Any] = {"values": params, "verdicts": verdicts, "report": None}
    context["verdicts_text"] = VERDICTS_TEXT[verdicts]
    try:
        a, b = page_filter(params, "a."), page_filter(params, "b.")
        report = (
            await comparison_report(services.store, a, b, verdicts=verdicts)
            if a != ReportFilter() and b != ReportFilter()
            else None
        )
    except InvalidRequest as refused:  # the form again, as sent, saying what is wrong
        return page("compare.html", who, status_code=422, error=str(refused), **context)
    if report is not None:
        arms = [
            _rate_row(report.a.outcome, a, f"a: {describe_filter(a)}"),
            _rate_row(report.b.outcome, b, f"b: {describe_filter(b)}"),
        ]
        d = report.difference
        diff = ChartRow(
            "a − b", 0, 0,
            d.estimate, d.interval.low if d.interval else 0.0,
            d.interval.high if d.interval else 0.0,
        )  # fmt: skip
        context |= {
            "report": report,
            "arms_chart": chart(arms),
            "diff_chart": chart([diff], lo=-1.0, hi=1.0),
            "scenarios": await _per_scenario(services, a, b, verdicts)
            if report.by_scenario
            else [],
            "links": (gradings_link(a), gradings_link(b)),
        }
    elif any(v.strip() for k, v in params.items() if k.startswith(("a.", "b."))):
        context["error"] = "give each arm at least one filter (e.g. a.model and b.model)"
    return page("compare.html", who, **context)


def _kappa_row(row: AgreementRow, link: str | None) -> ChartRow:
    f = row.agreement
    low, high = (f.kappa_interval.low, f.kappa_interval.high) if f.kappa_interval else (0.0, 0.0)
    return ChartRow(row.item, f.agreed, f.n, f.kappa, low, high, link, f.kappa_undefined)


@get("/reports/agreement", guards=[web_require("adjudicator")], include_in_schema=False)
async def agreement_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    source: FromQuery[Literal["blind", "override", "all"]] = "all",
) -> Template:
    """How the judge agrees with humans: Cohen's kappa per question with its interval."""
    filters = page_filter(_params(request))
    report = await build_agreement_report(
        services.store, filters, kinds=["judge_human"], source=source
    )
    rows = report.kinds[0].rows
    labelled = gradings_text(replace(filters, current_only=False))  # what the labels are on
    link = gradings_link(filters)
    drawn = [_kappa_row(r, link) for r in rows if r.level in ("question", "verdict", "answers")]
    return page(
        "agreement.html",
        who,
        report=report,
        rows=rows,
        kappa_chart=chart(drawn, lo=-1.0, hi=1.0),
        scope=describe_filter(filters, everything=labelled),
        source=source,
        values=_params(request),
        carried=carried_filters(_params(request)),
    )


@get("/reports/table", guards=[web_require("adjudicator")], include_in_schema=False)
async def evaluation_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    by: FromQuery[ColumnKind] = "judge",
    disagreeing_only: FromQuery[bool] = False,
) -> Template:
    """The evaluation table: one row per scenario attempt, one column per judge, rubric
    version, agent, model or run; disagreeing rows marked, and filterable. Its summary
    describes the gradings counted, shadow regrades included unless the filter says not."""
    params = _params(request)
    filters = table_filter(page_filter(params))
    table = await evaluation_table(
        services.store, filters, by=by, disagreeing_only=disagreeing_only
    )
    query = {**params, "by": by, "disagreeing_only": str(disagreeing_only).lower()}
    return page(
        "evaluation.html",
        who,
        table=table,
        values=params,
        carried=carried_filters(params),
        by=by,
        kinds=COLUMN_KINDS,
        disagreeing_only=disagreeing_only,
        scope=describe_filter(filters),
        csv_link="/reports/table.csv?" + urlencode(query),
    )


@get("/reports/table.csv", guards=[web_require("adjudicator")], include_in_schema=False)
async def evaluation_csv_page(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    by: FromQuery[ColumnKind] = "judge",
    disagreeing_only: FromQuery[bool] = False,
) -> Response[str]:
    """The evaluation table of the page, as CSV (what ``/v1/stats/evaluation-table``
    answers with ``format=csv``)."""
    filters = page_filter(_params(request))
    table = await evaluation_table(
        services.store, filters, by=by, disagreeing_only=disagreeing_only
    )
    return Response(
        evaluation_csv(table),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": 'attachment; filename="evaluation-table.csv"',
            **evaluation_csv_headers(table),
        },
    )
