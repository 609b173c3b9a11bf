"""``GET /v1/stats/agreement``: how the judge agrees with humans, other judges, and humans
with each other."""

from __future__ import annotations

from typing import Literal

from litestar import get
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery

from api.http.auth import require
from api.http.problems import ApiProblem
from api.http.report_params import report_filter
from api.service.reports.agreement import AgreementReport, build_agreement_report
from api.service.services import Services
from storage.agreement import AGREEMENT_GROUPS, AGREEMENT_KINDS, AgreementKind
from storage.report_queries import ReportFilter

__all__ = ["get_agreement"]


def _split(value: str | None, known: tuple[str, ...], field: str) -> list[str]:
    names = [p.strip() for p in (value or "").split(",") if p.strip()]
    for name in names:
        if name not in known:
            raise ApiProblem(
                422, "invalid query", f"{field}: {name!r} is not one of {', '.join(known)}",
                field=field,
            )  # fmt: skip
    return names


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
    kind: FromQuery[str | None] = None,
    group_by: FromQuery[str | None] = None,
    source: FromQuery[Literal["blind", "override", "all"]] = "all",
) -> AgreementReport:
    """``kind``: comma-separated among judge_human, judge_judge, human_human (default all);
    ``group_by``: rubric, judge, provisional; ``source``: which human labels count (blind,
    override). Every kind compares the judges' own answers and verdicts, as its
    ``definition`` says; an undefined kappa is null with ``kappa_undefined`` saying why."""
    kinds: list[AgreementKind] = _split(kind, AGREEMENT_KINDS, "kind") or list(AGREEMENT_KINDS)  # type: ignore[assignment]
    groups = _split(group_by, AGREEMENT_GROUPS, "group_by")
    return await build_agreement_report(
        services.store, filters, kinds=kinds, group_by=groups, source=source
    )
