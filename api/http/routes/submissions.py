"""``POST /v1/submissions``: accept a diagnosis durably, grade it in the background."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Annotated, Any

from litestar import Request, Response, post
from litestar.di import NamedDependency
from litestar.params import HeaderParameter, JSONBody, QueryParameter

from api.http.auth import Principal, require
from api.http.limits import SubmissionLimits
from api.http.problems import ApiProblem
from api.service.metrics import Metrics
from api.service.presenters import grading_public, render_grading
from api.service.qualification import self_preference_family
from api.service.schemas import GradingPublic, SubmissionCreate
from api.service.services import Services
from judge.grader import check_text
from judge.secrets import redact
from storage import GradingView, NewSubmission

__all__ = ["create_submission"]

#: how often a waiting request re-reads the grading (work done by other processes)
_POLL_SECONDS = 0.25


async def _resolve_truth(
    services: NamedDependency[Services], data: SubmissionCreate
) -> tuple[str, str]:
    if data.ground_truth is not None:
        return data.ground_truth, "inline"
    assert data.scenario_id is not None
    scenario = await services.store.get_scenario(data.scenario_id)
    if scenario is None:
        raise ApiProblem(
            422,
            "Unknown scenario",
            f"no scenario with id {data.scenario_id!r}",
            field="scenario_id",
        )
    return scenario.ground_truth, "scenario"


def _shutting_down(request: Request[Any, Any, Any]) -> bool:
    """Whether the server is shutting down (waiting requests then answer 202 at once)."""
    workers = getattr(request.app.state, "workers", None)
    return bool(workers is not None and workers.stopping)


async def _wait_for(
    services: NamedDependency[Services],
    grading_id: str,
    seconds: float,
    request: Request[Any, Any, Any],
    *,
    pending: bool = False,
) -> GradingView | None:
    """Re-read the grading until it is done or ``seconds`` passed; woken in-process.

    ``pending``: the grading is known to be pending (just stored), so the first read
    is skipped and the wait begins at once.
    """
    event = services.waiters.event_for(grading_id)
    deadline = time.monotonic() + seconds
    try:
        while True:
            remaining = deadline - time.monotonic()
            if not pending or _shutting_down(request):
                view = await services.store.get_grading(grading_id)
                if view is None or view.grading.status != "pending":
                    return view
                if remaining <= 0 or _shutting_down(request):
                    return view
            pending = False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=max(0, min(remaining, _POLL_SECONDS)))
    finally:
        services.waiters.forget(grading_id)


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
        str | None, HeaderParameter(name="Idempotency-Key", max_length=256, required=False)
    ] = None,
) -> Response[GradingPublic]:
    """Store the submission and a pending grading before answering; optionally wait for it.

    201 with the grading when it is done within ``wait`` seconds, else 202 with ``Location``.
    429 or 503 with ``Retry-After`` when a limit is reached (nothing is stored then).
    """
    await limits.admit(principal.id)
    settings = services.settings
    problem = data.truth_problem()
    if problem:
        raise ApiProblem(422, "Invalid request", problem, field="scenario_id")
    check_text(data.diagnosis, field="diagnosis", max_bytes=settings.max_text_bytes)
    if data.ground_truth is not None:
        check_text(data.ground_truth, field="ground_truth", max_bytes=settings.max_text_bytes)
    rubric_id = data.rubric or settings.rubric
    rubric = await services.rubrics.resolve(rubric_id)
    if rubric is None:
        raise ApiProblem(422, "Unknown rubric", f"no rubric with id {rubric_id!r}", field="rubric")
    truth, source = await _resolve_truth(services, data)
    judge_spec, judge_backend, judge_model = settings.grading_judge()
    family = self_preference_family(judge_spec, data.model)
    if family is not None and settings.self_preference == "refuse":
        raise ApiProblem(
            422,
            "Judge of the agent's own family",
            f"the judge and the model {data.model!r} are both of the {family} family, and "
            "judges favour their own family's text (SRE_JUDGE_SELF_PREFERENCE=refuse)",
            field="model",
        )
    # credentials never reach the database or a judge: only kinds and positions are kept
    redacted = await asyncio.to_thread(redact, data.diagnosis)
    outcome = await services.store.create_submission(
        NewSubmission(
            diagnosis=redacted.text,
            ground_truth=truth,
            ground_truth_source=source,  # type: ignore[arg-type]
            scenario_id=data.scenario_id,
            agent=data.agent,
            model=data.model,
            run_id=data.run_id,
            attempt=data.attempt,
            metadata=data.metadata,
            redactions=redacted.records(),
        ),
        rubric=rubric,
        judge_spec=judge_spec,
        judge_backend=judge_backend,
        judge_model=judge_model,
        actor=principal.id,
        idempotency_key=idempotency_key,
    )
    services.waiters.work.set()
    if outcome.created:
        metrics.submissions_accepted.inc()
    grading_id = outcome.grading.id
    if outcome.created and not wait:
        # just stored and pending: no answers, overrides or tags to read back
        view = GradingView(grading=outcome.grading, answers=(), submission=outcome.submission)
        body = grading_public(view, rubric=rubric, principal=principal)
    else:
        waited = await _wait_for(services, grading_id, wait, request, pending=outcome.created)
        if waited is None:  # pragma: no cover - the grading was committed above
            raise ApiProblem(500, "Internal error", "the grading vanished")
        body = await render_grading(services, waited, principal)
    location = f"/v1/gradings/{grading_id}"
    status = 202 if body.status == "pending" else 201
    headers = {"Location": location, "ETag": f'"{body.revision}"'}
    if not outcome.created:
        headers["Idempotent-Replayed"] = "true"
    return Response(body, status_code=status, headers=headers)
