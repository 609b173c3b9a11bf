"""Regrade jobs: start one (or a dry run), follow it, pause, resume, cancel, read flips;
an offline batch engine's requests file out and results file in."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody

from api.http.auth import require
from api.http.problems import ApiProblem
from api.http.uploads import file_operation, media_type_of, params_only, read_upload
from api.regrade.flips import flip_report, flips_csv
from api.regrade.schemas import (
    BatchResultsPublic,
    RegradeJobCreate,
    RegradeJobPublic,
    job_public,
)
from api.regrade.use_cases import (
    JobAction,
    batch_requests,
    batch_results,
    change_regrade,
    regrade_flips,
    regrade_job,
    start_regrade,
)
from api.service.principal import Principal
from api.service.services import Services

__all__ = [
    "BATCH_MEDIA_TYPES",
    "cancel_regrade_job",
    "create_regrade_job",
    "get_batch_requests",
    "get_regrade_flips",
    "get_regrade_job",
    "pause_regrade_job",
    "post_batch_results",
    "resume_regrade_job",
]

#: what a results file may be sent as
BATCH_MEDIA_TYPES = frozenset(
    {"application/jsonl", "application/x-ndjson", "application/octet-stream", "text/plain"}
)


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
    body = job_public(view, engine=data.engine)
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
    await change_regrade(services, job_id, action, actor=principal.id)
    return await regrade_job(services, job_id)  # the job object GET answers, engine and all


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


@get(
    "/v1/regrade-jobs/{job_id:str}/batch-requests",
    guards=[require("admin")],
    operation_id="getRegradeBatchRequests",
    summary="An offline regrade's judge requests with no reply yet, as OpenAI-batch JSON lines",
    media_type="application/jsonl",
)
async def get_batch_requests(
    job_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> Response[str]:
    """One ``{"custom_id", "method", "url", "body"}`` line per request (the input of
    ``vllm run-batch`` or Ray Data's LLM processors); rendered first if still to do.
    422 naming ``engine`` for a job not graded offline; 409 once the job takes no more
    results, or for a cancelled job whose requests are not written yet."""
    lines = await batch_requests(services, job_id, actor=principal.id)
    headers = {
        "Content-Disposition": f'attachment; filename="requests-{job_id}.jsonl"',
        "X-Batch-Requests": str(len(lines)),
    }
    text = "".join(f"{line}\n" for line in lines)
    return Response(text, media_type="application/jsonl", headers=headers)


_RESULTS = file_operation(
    "the results file itself: one "
    '{"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"} '
    "line per request; Content-Type " + ", ".join(sorted(BATCH_MEDIA_TYPES))
)


async def _read_text(request: Request[Any, Any, Any], limit: int) -> str:
    media_type_of(request, BATCH_MEDIA_TYPES)
    data = await read_upload(request, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiProblem(422, "Invalid results file", "body: not UTF-8", field="body") from None


@post(
    "/v1/regrade-jobs/{job_id:str}/batch-results",
    guards=[require("admin")],
    before_request=params_only,
    request_max_body_size=None,
    operation_class=_RESULTS,
    operation_id="postRegradeBatchResults",
    summary="Import an offline regrade's results file (OpenAI-batch output JSON lines)",
    status_code=200,
)
async def post_batch_results(
    job_id: FromPath[str],
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> BatchResultsPublic:
    """Each result is checked against its request (known custom id, once, same model) and
    its reply kept once; a line that cannot be read refuses the file (422 naming the
    field, nothing stored). Importing a file again keeps nothing twice (``duplicates``).
    409 before the job's requests are written, or once the job takes no more results."""
    text = await _read_text(request, services.settings.import_max_bytes)
    return await batch_results(services, job_id, text, actor=principal.id)
