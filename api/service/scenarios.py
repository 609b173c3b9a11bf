"""Scenarios: ground truths registered once, so agents submit only an id."""

from __future__ import annotations

from api.service.principal import Principal
from api.service.schemas import ScenarioCreate
from api.service.services import Services
from judge.inputs import check_text
from storage import NotFound
from storage.tables import ScenarioRecord

__all__ = ["register_scenario", "scenario"]


async def register_scenario(
    services: Services, principal: Principal, request: ScenarioCreate
) -> ScenarioRecord:
    """Store a scenario in ``principal``'s name; Conflict when the id exists."""
    max_bytes = services.settings.max_text_bytes
    check_text(request.ground_truth, field="ground_truth", max_bytes=max_bytes)
    return await services.store.catalog.create_scenario(
        id=request.id,
        ground_truth=request.ground_truth,
        title=request.title,
        tags=request.tags,
        actor=principal.id,
    )


async def scenario(services: Services, scenario_id: str) -> ScenarioRecord:
    """A registered scenario with its ground truth, else :class:`NotFound`."""
    record = await services.store.catalog.get_scenario(scenario_id)
    if record is None:
        raise NotFound(f"no scenario with id {scenario_id!r}")
    return record
