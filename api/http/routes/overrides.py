"""Human corrections of a grading, and its full history."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, HeaderParameter, JSONBody

from api.http.auth import require
from api.http.problems import ApiProblem
from api.http.routes.gradings import readable_grading
from api.service.presenters import render_grading
from api.service.principal import Principal
from api.service.schemas import GradingPublic, OverrideCreate
from api.service.services import Services

__all__ = ["create_override", "grading_history"]


def _expected_revision(if_match: str | None) -> int:
    if if_match is None:
        raise ApiProblem(
            428,
            "Precondition required",
            "overrides need If-Match with the grading's ETag",
            field="If-Match",
        )
    value = if_match.strip().removeprefix("W/").strip('"')
    if not value.isdigit():
        raise ApiProblem(
            412,
            "Precondition failed",
            f"If-Match {if_match!r} is not an ETag of this service",
            field="If-Match",
        )
    return int(value)


@post(
    "/v1/gradings/{grading_id:str}/overrides",
    guards=[require("adjudicator")],
    operation_id="createOverride",
    summary="Override one answer or the verdict (If-Match required)",
    status_code=201,
)
async def create_override(
    grading_id: FromPath[str],
    data: JSONBody[OverrideCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    if_match: Annotated[str | None, HeaderParameter(name="If-Match", required=False)] = None,
) -> Response[GradingPublic]:
    """Append an override as the calling principal; 412 when the ETag is stale."""
    problem = data.kind_problem()
    if problem:
        raise ApiProblem(422, "Invalid request", problem[1], field=problem[0])
    expected = _expected_revision(if_match)
    view = await readable_grading(services, principal, grading_id)
    g = view.grading
    rubric = await services.rubrics.resolve(g.rubric_id, g.rubric_version)
    if rubric is None:
        raise ApiProblem(409, "Conflict", f"rubric {g.rubric_id}@{g.rubric_version} is unknown")
    await services.store.overrides.add(
        grading_id,
        rubric=rubric,
        expected_revision=expected,
        kind=data.kind,
        reason=data.reason,
        author_id=principal.id,
        author_name=principal.name,
        question_id=data.question_id,
        answer=None if data.answer is None else data.answer == "yes",
        verdict=data.verdict,
        withdraws=data.withdraw,
    )
    fresh = await readable_grading(services, principal, grading_id)
    body = await render_grading(services, fresh, principal)
    return Response(body, status_code=201, headers={"ETag": f'"{body.revision}"'})


@get(
    "/v1/gradings/{grading_id:str}/history",
    guards=[require("adjudicator")],
    operation_id="gradingHistory",
    summary="Every event of a grading, oldest first, with judge prompts and replies",
)
async def grading_history(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Audit events of the grading and its submission, judge calls in full, overrides."""
    await readable_grading(services, principal, grading_id)
    events = await services.store.gradings.history(grading_id)
    calls = {c.id: c for c in await services.store.gradings.judge_calls(grading_id)}
    items = []
    for event in events:
        item: dict[str, Any] = {
            "seq": event.seq,
            "at": event.created_at,
            "event": event.event,
            "actor": event.actor,
            "payload": event.payload,
            "hash": event.hash,
        }
        call = calls.get(str(event.payload.get("call_id", "")))
        if event.event == "judge.call" and call is not None:
            item["call"] = {
                "purpose": call.purpose,
                "backend": call.backend,
                "model": call.model,
                "messages": call.messages,
                "params": call.params,
                "response_text": call.response_text,
                "fingerprint": call.fingerprint,
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "latency_ms": call.latency_ms,
                "attempts": call.attempts,
                "error_code": call.error_code,
            }
        items.append(item)
    return {"grading_id": grading_id, "events": items}
