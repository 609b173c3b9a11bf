"""Scenarios: ground truths registered once, so agents submit only an id."""

from __future__ import annotations

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from api.http.auth import require
from api.http.problems import ApiProblem
from api.service.principal import Principal
from api.service.schemas import ScenarioCreate, ScenarioPublic
from api.service.services import Services
from judge.grader import check_text
from storage.tables import ScenarioRecord

__all__ = ["create_scenario", "get_scenario"]


def _public(record: ScenarioRecord) -> ScenarioPublic:
    return ScenarioPublic(
        id=record.id,
        ground_truth=record.ground_truth,
        title=record.title,
        tags=list(record.tags or []),
        created_at=record.created_at,
    )


@post("/v1/scenarios", guards=[require("admin")], operation_id="createScenario", status_code=201)
async def create_scenario(
    data: JSONBody[ScenarioCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> ScenarioPublic:
    """Register a scenario; 409 when the id exists."""
    check_text(data.ground_truth, field="ground_truth", max_bytes=services.settings.max_text_bytes)
    record = await services.store.catalog.create_scenario(
        id=data.id,
        ground_truth=data.ground_truth,
        title=data.title,
        tags=data.tags,
        actor=principal.id,
    )
    return _public(record)


@get("/v1/scenarios/{scenario_id:str}", guards=[require("adjudicator")], operation_id="getScenario")
async def get_scenario(
    scenario_id: FromPath[str], services: NamedDependency[Services]
) -> ScenarioPublic:
    """A scenario with its ground truth (adjudicators and admins only)."""
    record = await services.store.catalog.get_scenario(scenario_id)
    if record is None:
        raise ApiProblem(404, "Not found", f"no scenario with id {scenario_id!r}")
    return _public(record)
