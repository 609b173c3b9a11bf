"""The drift canary's HTTP routes: run it now (admin), read its runs (adjudicator+).

Thin controllers: path, guards and one use case of :mod:`api.judges.canary` each.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, QueryParameter
from pydantic import BaseModel, ConfigDict

from api.http.auth import require
from api.judges.canary import canary_answer, canary_history, run_canaries
from api.service.principal import Principal
from api.service.services import Services

__all__ = ["CanaryRequest", "list_canary_runs", "start_canary_run"]


class CanaryRequest(BaseModel):
    """A canary run on demand of the service's judges (``{}``: each member of a panel;
    another judge's canary runs from the command line, ``sre-judge judges canary
    --judge``)."""

    model_config = ConfigDict(extra="forbid")


@post(
    "/v1/judges/canary",
    guards=[require("admin")],
    operation_id="runJudgeCanary",
    status_code=201,
)
async def start_canary_run(
    request: Request[Any, Any, Any],
    data: JSONBody[CanaryRequest],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Regrade the canary set now with each judge the service grades with (within the
    call budget, bypassing the judge cache) and answer with the stored run (a panel's:
    ``{"demoted", "runs"}``, a run a member); a drifted judge is demoted."""
    metrics = getattr(request.app.state, "metrics", None)
    del data  # nothing to choose yet: the body is {}
    runs = await run_canaries(services, actor=principal.id, metrics=metrics)
    return canary_answer(services.settings, runs)


@get("/v1/judges/canary", guards=[require("adjudicator")], operation_id="listJudgeCanaryRuns")
async def list_canary_runs(
    services: NamedDependency[Services],
    judge: Annotated[str | None, QueryParameter(max_length=512)] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=500)] = 100,
) -> dict[str, list[dict[str, Any]]]:
    """Canary runs, newest first (``judge``: of one judge, ``backend:model``)."""
    return {"items": await canary_history(services, judge=judge, limit=limit)}
