"""Regrade jobs: start one (or a dry run), follow it, pause, resume, cancel, read flips."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from api.http.auth import require
from api.regrade.flips import flip_report, flips_csv
from api.regrade.schemas import RegradeJobCreate, RegradeJobPublic, job_public
from api.regrade.use_cases import (
    JobAction,
    change_regrade,
    regrade_flips,
    regrade_job,
    start_regrade,
)
from api.service.principal import Principal
from api.service.services import Services

__all__ = [
    "cancel_regrade_job",
    "create_regrade_job",
    "get_regrade_flips",
    "get_regrade_job",
    "pause_regrade_job",
    "resume_regrade_job",
]


@post(
    "/v1/regrade-jobs",
    guards=[require("admin")],
    operation_id="createRegradeJob",
    summary="Start a regrade job, or estimate one with dry_run",
    status_code=201,
)
async def create_regrade_job(
    data: JSONBody[RegradeJobCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> Response[RegradeJobPublic]:
    """201 with the job; a dry run answers 200 with the estimate in state ``done``
    and stores nothing (so it has no ``Location``)."""
    view = await start_regrade(services, data, actor=principal.id)
    body = job_public(view)
    if data.dry_run:
        return Response(body, status_code=200)
    headers = {"Location": f"/v1/regrade-jobs/{body.id}"}
    return Response(body, status_code=201, headers=headers)


@get(
    "/v1/regrade-jobs/{job_id:str}",
    guards=[require("admin")],
    operation_id="getRegradeJob",
    summary="A regrade job with its progress",
)
async def get_regrade_job(
    job_id: FromPath[str], services: NamedDependency[Services]
) -> RegradeJobPublic:
    """State, counts (done, failed, remaining), rate and ETA."""
    return await regrade_job(services, job_id)


@get(
    "/v1/regrade-jobs/{job_id:str}/flips",
    guards=[require("admin")],
    operation_id="getRegradeFlips",
    summary="What flipped: verdicts, answers, agreement, human overrides",
)
async def get_regrade_flips(
    job_id: FromPath[str],
    services: NamedDependency[Services],
    format: FromQuery[Literal["json", "csv"]] = "json",
    verdicts: FromQuery[Literal["effective", "judge"]] = "effective",
) -> Response[Any]:
    """The flip report as JSON, or one CSV row per item with ``?format=csv``.

    ``verdicts=effective`` (after human overrides) or ``judge`` (the judges' own, as the
    agreement report counts judge against judge): flips, answer matrices and kappa all
    use that one definition, named in the report's ``definitions``.
    """
    job, items = await regrade_flips(services, job_id)
    if format == "csv":
        headers = {"Content-Disposition": f'attachment; filename="flips-{job_id}.csv"'}
        return Response(flips_csv(items, verdicts=verdicts), media_type="text/csv", headers=headers)
    return Response(flip_report(job.model_dump(mode="json"), items, verdicts=verdicts))


async def _change(
    services: Services, principal: Principal, job_id: str, action: JobAction
) -> RegradeJobPublic:
    return job_public(await change_regrade(services, job_id, action, actor=principal.id))


@post(
    "/v1/regrade-jobs/{job_id:str}/pause",
    guards=[require("admin")],
    operation_id="pauseRegradeJob",
    status_code=200,
)
async def pause_regrade_job(
    job_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> RegradeJobPublic:
    """Stop handing out the job's items; items in flight finish."""
    result: RegradeJobPublic = await _change(services, principal, job_id, "pause")
    return result


@post(
    "/v1/regrade-jobs/{job_id:str}/resume",
    guards=[require("admin")],
    operation_id="resumeRegradeJob",
    status_code=200,
)
async def resume_regrade_job(
    job_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> RegradeJobPublic:
    """Continue a paused or cancelled job where it stopped."""
    result: RegradeJobPublic = await _change(services, principal, job_id, "resume")
    return result


@post(
    "/v1/regrade-jobs/{job_id:str}/cancel",
    guards=[require("admin")],
    operation_id="cancelRegradeJob",
    status_code=200,
)
async def cancel_regrade_job(
    job_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> RegradeJobPublic:
    """Cancel the job's pending items (status ``cancelled``); graded items are kept."""
    result: RegradeJobPublic = await _change(services, principal, job_id, "cancel")
    return result
