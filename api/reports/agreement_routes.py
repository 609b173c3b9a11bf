"""``GET /v1/stats/agreement``: how the judge agrees with humans, other judges, and humans
with each other."""

from __future__ import annotations

from typing import Annotated, Literal, cast

from litestar import get
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery

from api.http.auth import require
from api.reports.agreement import AgreementReport, build_agreement_report
from api.reports.agreement_queries import AGREEMENT_GROUPS, AGREEMENT_KINDS, AgreementKind
from api.reports.filters import ReportFilter
from api.reports.params import comma_list_param, parse_comma_list, report_filter
from api.service.services import Services

__all__ = ["get_agreement"]

_KINDS_TEXT = "comma-separated; default: every kind"


@get(
    "/v1/stats/agreement",
    guards=[require("adjudicator")],
    dependencies={"filters": Provide(report_filter)},
    operation_id="getAgreement",
    summary="Agreement: judge vs human, judge vs judge, human vs human, with kappa and 95% CI",
    tags=["stats"],
)
async def get_agreement(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    kind: Annotated[str | None, comma_list_param(AGREEMENT_KINDS, _KINDS_TEXT)] = None,
    group_by: Annotated[str | None, comma_list_param(AGREEMENT_GROUPS, "comma-separated")] = None,
    source: FromQuery[Literal["blind", "override", "all"]] = "all",
) -> AgreementReport:
    """``kind``: comma-separated among judge_human, judge_judge, human_human (default all);
    ``group_by``: rubric, judge, provisional; ``source``: which human labels count (blind,
    override). Every kind compares the judges' own answers and verdicts, as its
    ``definition`` says; an undefined kappa is null with ``kappa_undefined`` saying why."""
    kinds = cast(
        list[AgreementKind], parse_comma_list(kind, AGREEMENT_KINDS, "kind") or AGREEMENT_KINDS
    )
    groups = parse_comma_list(group_by, AGREEMENT_GROUPS, "group_by")
    return await build_agreement_report(
        services.store,
        filters,
        kinds=kinds,
        group_by=groups,
        source=source,
        current=services.rubrics.current,
    )
