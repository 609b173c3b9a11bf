"""Scenarios: ground truths registered once, so agents submit only an id."""

from __future__ import annotations

from pathlib import Path

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from api.http.auth import require
from api.service.principal import Principal
from api.service.scenarios import register_scenario, scenario
from api.service.schemas import ScenarioCreate, ScenarioPublic
from api.service.services import Services
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
    return _public(await register_scenario(services, principal, data))


@get(
    "/v1/scenarios/{scenario_id:path}",
    guards=[require("adjudicator")],
    operation_id="getScenario",
)
async def get_scenario(
    scenario_id: FromPath[Path], services: NamedDependency[Services]
) -> ScenarioPublic:
    """A scenario with its ground truth (adjudicators and admins only); ids may hold
    slashes, as SREGym's ``hotel/user-port`` does."""
    return _public(await scenario(services, str(scenario_id).removeprefix("/")))
