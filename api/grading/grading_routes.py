"""Reading gradings: one by id, or a filtered, cursor-paginated list."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from litestar import Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter

from api.grading.judge_moves import JudgeMoveReport, JudgeMoveRequest, move_pending_gradings
from api.http.auth import require
from api.service.errors import InvalidRequest
from api.service.presenters import read_grading, readable_gradings
from api.service.principal import Principal
from api.service.schemas import GradingPage, GradingRead
from api.service.services import Services
from api.service.visibility import grading_etag
from judge.rubric import named_rubric_ref
from storage import GradingFilter
from storage.search import parse_search

__all__ = ["get_grading", "list_gradings", "move_gradings_judge"]


@get(
    "/v1/gradings/{grading_id:str}",
    guards=[require("submitter")],
    operation_id="getGrading",
    summary="One grading",
)
async def get_grading(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> Response[GradingRead]:
    """The grading object; the ETag is its revision. A submitter reading a grading
    against a registered scenario gets its view of it (``SRE_JUDGE_SUBMITTER_VIEW``),
    whose ETag is a digest of the view.
    Read in one snapshot: the grading (with its votes), its answers, overrides and tags
    agree."""
    body = await read_grading(services, principal, grading_id)
    return Response(body, headers={"ETag": grading_etag(body, principal)})


@get(
    "/v1/gradings",
    guards=[require("submitter")],
    operation_id="listGradings",
    summary="Gradings, newest first, cursor-paginated",
)
async def list_gradings(
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    agent: FromQuery[str | None] = None,
    model: FromQuery[str | None] = None,
    scenario_id: FromQuery[str | None] = None,
    status: FromQuery[Literal["pending", "graded", "unscored"] | None] = None,
    passed: FromQuery[bool | None] = None,
    held: FromQuery[bool | None] = None,
    created_after: FromQuery[datetime | None] = None,
    created_before: FromQuery[datetime | None] = None,
    tag: FromQuery[str | None] = None,
    judge: Annotated[
        str | None,
        QueryParameter(
            description="the judge as reports label it: its model, or backend:model "
            "(panel:... for a panel)"
        ),
    ] = None,
    rubric: Annotated[
        str | None,
        QueryParameter(
            description="the rubric: id or id@version",
            pattern=r"^[^@]*[^@\s][^@]*(@.*\S.*)?$",  # no empty id, no empty version
        ),
    ] = None,
    q: Annotated[
        str | None,
        QueryParameter(
            description="full-text search of diagnoses, override reasons and tag notes: "
            'words ANDed, "a phrase", prefix*, -excluded'
        ),
    ] = None,
    cursor: FromQuery[str | None] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
) -> GradingPage:
    """Submitters see their own gradings; adjudicators and admins see all. ``q``
    searches the diagnosis, override reasons and tag notes (``storage.search``); 422
    naming ``q`` when it is malformed. ``judge`` and ``rubric`` take the reports' labels,
    so a report's group lists the gradings behind it (422 naming ``rubric`` for ``id@``
    or an empty id, which name no rubric)."""
    rubric_id, version = _rubric_filter(rubric)
    filters = GradingFilter(
        agent=agent,
        model=model,
        scenario_id=scenario_id,
        status=status,
        passed=passed,
        held=held,
        created_after=created_after,
        created_before=created_before,
        tag=tag,
        judge=judge,
        rubric_id=rubric_id,
        rubric_version=version,
        search=parse_search(q),
    )
    items, next_cursor = await readable_gradings(
        services, principal, filters, cursor=cursor, limit=limit
    )
    return GradingPage(items=items, next_cursor=next_cursor)


def _rubric_filter(rubric: str | None) -> tuple[str | None, str | None]:
    """``rubric`` (``id`` or ``id@version``) as the list's (id, version) filter; an empty
    id or version names no rubric: refused naming ``rubric``."""
    if rubric is None:
        return None, None
    try:
        return named_rubric_ref(rubric)
    except ValueError as exc:
        raise InvalidRequest(str(exc), field="rubric") from exc


@post(
    "/v1/gradings:move-judge",
    guards=[require("admin")],
    operation_id="moveGradingsJudge",
    summary="Move pending gradings from one judge to another",
    status_code=200,
)
async def move_gradings_judge(
    data: JSONBody[JudgeMoveRequest],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> JudgeMoveReport:
    """Bind the pending gradings of submissions and imports recorded with ``from_judge``
    to ``to_judge`` (default: the configured judge), each move in the audit log
    (``grading.judge_moved``); gradings being graded are taken from their worker.
    Regrade job items keep their job's judge. With ``SRE_JUDGE_PENDING_JUDGE=follow``
    only the configured judge is a valid ``to_judge``."""
    return await move_pending_gradings(services, principal, data)
