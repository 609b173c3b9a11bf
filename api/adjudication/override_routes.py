"""Human corrections of a grading, and its full history."""

from __future__ import annotations

from typing import Any

from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from api.adjudication.use_cases import grading_history as history_of
from api.adjudication.use_cases import override_grading
from api.http.auth import require
from api.http.preconditions import expected_revision
from api.service.principal import Principal
from api.service.schemas import GradingPublic, OverrideCreate
from api.service.services import Services

__all__ = ["create_override", "grading_history"]


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
    if_match: NamedDependency[str | None],
) -> Response[GradingPublic]:
    """Append an override as the calling principal; 412 when the ETag is stale, 409 for
    an answer or verdict on a grading a promoted regrade superseded (override the one
    that replaced it)."""
    body = await override_grading(
        services,
        principal,
        grading_id,
        data,
        expected_revision=expected_revision(
            if_match, what="overrides need If-Match with the grading's ETag"
        ),
    )
    # the override is read in the grading object, where it now stands
    headers = {"ETag": f'"{body.revision}"', "Location": f"/v1/gradings/{body.id}"}
    return Response(body, status_code=201, headers=headers)


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
    return {"grading_id": grading_id, "events": await history_of(services, principal, grading_id)}
