"""``POST /v1/submissions``: accept a diagnosis durably, grade it in the background."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, post
from litestar.di import NamedDependency
from litestar.params import HeaderParameter, JSONBody, QueryParameter

from api.grading.intake import Accepted, accept_submission, wait_for_grading
from api.http.auth import require
from api.http.limits import SubmissionLimits
from api.http.problems import ApiProblem
from api.service.attempts import TooManyAttempts
from api.service.metrics import Metrics
from api.service.presenters import grading_public, read_grading
from api.service.principal import Principal
from api.service.schemas import GradingRead, SubmissionCreate
from api.service.services import Services
from api.service.visibility import grading_etag
from storage import GradingView

__all__ = ["create_submission"]


def _shutting_down(request: Request[Any, Any, Any]) -> bool:
    """Whether the server is shutting down (waiting requests then answer 202 at once)."""
    workers = getattr(request.app.state, "workers", None)
    return bool(workers is not None and workers.stopping)


@post(
    "/v1/submissions",
    guards=[require("submitter")],
    operation_id="createSubmission",
    summary="Submit a diagnosis for grading",
    status_code=202,
    responses={},
)
async def create_submission(
    data: JSONBody[SubmissionCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    limits: NamedDependency[SubmissionLimits],
    metrics: NamedDependency[Metrics],
    request: Request[Any, Any, Any],
    wait: Annotated[float, QueryParameter(ge=0, le=300)] = 0,
    idempotency_key: Annotated[
        str | None,
        HeaderParameter(name="Idempotency-Key", min_length=1, max_length=256, required=False),
    ] = None,
) -> Response[GradingRead]:
    """Store the submission and a pending grading before answering; optionally wait for it.

    201 with the grading when it is done within ``wait`` seconds, else 202 with ``Location``;
    once stored, 202 also when reading the grading back fails (a 5xx would have the client
    send it again and store it twice).
    429 or 503 with ``Retry-After`` when a limit is reached (nothing is stored then): the
    rate limit, the queue's ceiling, or a submitter's attempts on the scenario this hour.
    """
    taken = await limits.admit(principal.id, idempotency_key)
    stored = False
    try:
        accepted = await accept_submission(
            services, data, principal=principal, idempotency_key=idempotency_key
        )
        stored = accepted.outcome.created
    except TooManyAttempts:
        metrics.submissions_rejected.labels("attempt_limit").inc()
        raise
    finally:
        if taken and not stored:  # refused or replayed: the rate limit counts what is stored
            limits.not_stored(principal.id)
    outcome = accepted.outcome
    if outcome.created:
        metrics.submissions_accepted.inc()
    grading_id = outcome.grading.id
    if outcome.created and not wait:
        body = _just_stored(accepted, principal, services)
    else:
        try:
            body = await _waited(
                services, principal, grading_id, wait, request, created=outcome.created
            )
        except Exception:
            if not outcome.created:  # a replay stores nothing: the client may send it again
                raise
            # stored durably: the answer says so (202 + Location), never "try again",
            # which would store it twice
            request.logger.exception(
                "reading back grading %s after storing its submission failed; answered 202",
                grading_id,
            )
            body = _just_stored(accepted, principal, services)
    location = f"/v1/gradings/{grading_id}"
    status = 202 if body.status == "pending" else 201
    headers = {"Location": location, "ETag": grading_etag(body, principal)}
    if not outcome.created:
        headers["Idempotent-Replayed"] = "true"
    return Response(body, status_code=status, headers=headers)


def _just_stored(accepted: Accepted, principal: Principal, services: Services) -> GradingRead:
    """The grading of a submission just stored, as it was stored: pending, with no
    answers, overrides or tags to read back."""
    outcome = accepted.outcome
    view = GradingView(grading=outcome.grading, answers=(), submission=outcome.submission)
    return grading_public(
        view,
        rubric=accepted.rubric,
        principal=principal,
        submitter_view=services.settings.submitter_view,
    )


async def _waited(
    services: Services,
    principal: Principal,
    grading_id: str,
    wait: float,
    request: Request[Any, Any, Any],
    *,
    created: bool,
) -> GradingRead:
    """The grading once it is done or ``wait`` seconds passed (``created``: just stored,
    so pending), as ``GET /v1/gradings/{id}`` reads it."""
    waited = await wait_for_grading(
        services, grading_id, wait, pending=created, stopping=lambda: _shutting_down(request)
    )
    if waited is None:  # pragma: no cover - the grading was committed with its submission
        raise ApiProblem(500, "Internal error", "the grading vanished")
    # the object as GET /v1/gradings/{id} reads it, in one snapshot: the grading, its
    # answers, overrides and tags agree, whatever changed since the wait ended
    return await read_grading(services, principal, grading_id)
