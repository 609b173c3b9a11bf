"""Figures over stored gradings, each with its sample size and a 95% interval.

Adjudicators and admins only: the figures cover every submitter's gradings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from litestar import Request, Response, get
from litestar.datastructures import ResponseHeader
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery, QueryParameter

from api.http.auth import require
from api.reports.evaluation import (
    ColumnKind,
    EvaluationTable,
    evaluation_csv,
    evaluation_csv_headers,
    evaluation_table,
)
from api.reports.filters import ReportFilter
from api.reports.models import (
    ComparisonReport,
    DimensionReport,
    PassRateReport,
    QuestionReport,
    TagReport,
)
from api.reports.params import (
    ARM_FIELDS,
    GroupByParam,
    arm_filters,
    parse_group_by,
    report_filter,
)
from api.reports.rates import (
    comparison_report,
    dimension_report,
    pass_rate_report,
    question_report,
    tag_report,
)
from api.service.attempts import AttemptReport, attempt_report
from api.service.services import Services
from storage.attempts import MAX_PAGE as ATTEMPT_PAGE

__all__ = [
    "get_attempts",
    "get_comparison",
    "get_dimension_failures",
    "get_evaluation_table",
    "get_evaluation_table_csv",
    "get_failure_tags",
    "get_pass_rates",
    "get_question_rates",
]

VerdictsParam = FromQuery[Literal["effective", "judge"]]

_COMMON: dict[str, Any] = {
    "guards": [require("adjudicator")],
    "dependencies": {"filters": Provide(report_filter)},
    "tags": ["stats"],
}


@get(
    "/v1/stats/pass-rates",
    operation_id="getPassRates",
    summary="Pass rates with Wilson 95% intervals, overall and per group",
    **_COMMON,
)
async def get_pass_rates(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    group_by: GroupByParam = None,
    verdicts: VerdictsParam = "effective",
) -> PassRateReport:
    """``group_by`` is a comma-separated list of agent, model, scenario, rubric, judge.

    ``n`` counts passed and failed gradings; unscored and pending are counted apart.
    """
    return await pass_rate_report(
        services.store, filters, group_by=parse_group_by(group_by), verdicts=verdicts
    )


@get(
    "/v1/stats/compare",
    guards=[require("adjudicator")],
    operation_id="compareArms",
    summary="Difference in pass rate between two arms",
    description=(
        "Each arm is a filter given as query parameters prefixed with `a.` or `b.`: "
        f"{', '.join(ARM_FIELDS)} (e.g. `a.model=x&b.model=y`), plus `verdicts`. "
        "When both arms graded the same attempts (two judges or rubric versions over "
        "one set of submissions) the difference a - b is paired: McNemar's exact p-value "
        "and Newcombe's paired 95% interval (method 10); otherwise Fisher's exact p-value "
        "and Newcombe's (Wilson-based) interval for independent rates. `difference.design`, "
        "`difference.test` and `difference.note` say which and why. When a scenario was "
        "attempted several times, `by_scenario` repeats the comparison with each scenario "
        "counted once."
    ),
    tags=["stats"],
)
async def get_comparison(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    verdicts: VerdictsParam = "effective",
) -> ComparisonReport:
    """Arm a's pass rate minus arm b's."""
    a, b = arm_filters({k: request.query_params.getall(k) for k in request.query_params})
    return await comparison_report(services.store, a, b, verdicts=verdicts)


@get(
    "/v1/stats/questions",
    operation_id="getQuestionRates",
    summary="Yes rate of every question, with Wilson 95% intervals",
    **_COMMON,
)
async def get_question_rates(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    group_by: GroupByParam = None,
    verdicts: VerdictsParam = "effective",
) -> QuestionReport:
    """Answers of graded gradings; effective answers include human overrides."""
    return await question_report(
        services.store, filters, group_by=parse_group_by(group_by), verdicts=verdicts
    )


@get(
    "/v1/stats/dimensions",
    operation_id="getDimensionFailures",
    summary="How often each dimension is the one that fails a diagnosis",
    **_COMMON,
)
async def get_dimension_failures(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    group_by: GroupByParam = None,
    verdicts: VerdictsParam = "effective",
) -> DimensionReport:
    """Among failed diagnoses: the share where a dimension had no yes, or the fewest."""
    return await dimension_report(
        services.store, filters, group_by=parse_group_by(group_by), verdicts=verdicts
    )


@get(
    "/v1/stats/failure-tags",
    operation_id="getFailureTags",
    summary="Failure-tag counts among scored gradings",
    **_COMMON,
)
async def get_failure_tags(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    group_by: GroupByParam = None,
) -> TagReport:
    """Tags in force (not removed), most frequent first."""
    return await tag_report(services.store, filters, group_by=parse_group_by(group_by))


@get(
    "/v1/stats/evaluation-table",
    operation_id="getEvaluationTable",
    summary="One row per scenario attempt, one column per judge, rubric, agent, model or run",
    **_COMMON,
)
async def get_evaluation_table(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    by: FromQuery[ColumnKind] = "judge",
    disagreeing_only: FromQuery[bool] = False,
) -> EvaluationTable:
    """Each cell is the verdict (after human overrides) and yes count of that attempt's
    grading in that column (a current grading before a shadow or superseded one, then
    the newest), linked by its ``grading_id``. Columns of judges or rubric versions
    compare gradings of the same submission (shadow regrades included unless
    ``include`` says otherwise); columns of agents, models or runs compare the same
    scenario's attempts. ``disagreeing_only`` keeps the rows with a PASS beside a FAIL.
    At most 5,000 rows (``truncated``); the same table as CSV at
    ``/v1/stats/evaluation-table.csv``."""
    return await evaluation_table(services.store, filters, by=by, disagreeing_only=disagreeing_only)


@get(
    "/v1/stats/evaluation-table.csv",
    operation_id="getEvaluationTableCsv",
    summary="The evaluation table as CSV",
    media_type="text/csv",
    response_headers=[
        ResponseHeader(name="X-Table-Rows", description="rows in the CSV", documentation_only=True),
        ResponseHeader(
            name="X-Table-Truncated",
            description="true when attempts past the 5,000 newest were left out",
            documentation_only=True,
        ),
    ],
    **_COMMON,
)
async def get_evaluation_table_csv(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    by: FromQuery[ColumnKind] = "judge",
    disagreeing_only: FromQuery[bool] = False,
) -> Response[str]:
    """``/v1/stats/evaluation-table`` as CSV: the attempt's agent, model, scenario, run
    and attempt, then each column's verdict and yes count, then ``disagree``; the
    headers say how many rows it holds and whether attempts were left out."""
    table = await evaluation_table(
        services.store, filters, by=by, disagreeing_only=disagreeing_only
    )
    return Response(
        evaluation_csv(table), media_type="text/csv", headers=evaluation_csv_headers(table)
    )


@get(
    "/v1/stats/attempts",
    guards=[require("admin")],
    operation_id="getAttempts",
    summary="Attempts per token and registered scenario",
    tags=["stats"],
)
async def get_attempts(
    services: NamedDependency[Services],
    created_after: FromQuery[datetime | None] = None,
    scenario_id: FromQuery[str | None] = None,
    cursor: FromQuery[str | None] = None,
    limit: Annotated[int | None, QueryParameter(ge=1, le=ATTEMPT_PAGE)] = None,
) -> AttemptReport:
    """Submissions each token made against each registered scenario since
    ``created_after`` (default: the last hour, the window of
    ``SRE_JUDGE_SUBMITTER_ATTEMPTS_PER_SCENARIO_PER_HOUR``), most attempts first;
    refused attempts are counted in ``/metrics`` (``sre_judge_submissions_rejected``,
    reason ``attempt_limit``). Admins only: it names tokens. Up to ``limit`` pairs
    (default and most 5000) a page; ``next_cursor``, null when nothing is left, passed
    back as ``cursor`` gives the rest over the same period (400 naming ``cursor`` for
    one this service did not sign)."""
    return await attempt_report(
        services, since=created_after, scenario_id=scenario_id, cursor=cursor, limit=limit
    )
