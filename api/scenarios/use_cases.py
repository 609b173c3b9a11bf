"""Scenarios as a dataset: registered once, listed, loaded in bulk, their ground truth
versioned. Ground truths and their versions reach adjudicators and admins only."""

from __future__ import annotations

import asyncio
from collections import Counter

from api.scenarios.loading import LoadFormat, parse_scenarios
from api.scenarios.queries import ScenarioFilter, ScenarioQueries
from api.scenarios.schemas import (
    ScenarioCreate,
    ScenarioLoadItem,
    ScenarioLoadReport,
    ScenarioPage,
    ScenarioPublic,
    ScenarioUpdate,
    ScenarioVersionList,
    ScenarioVersionPublic,
)
from api.service.principal import Principal
from api.service.services import Services
from judge.inputs import check_text
from storage import NotFound
from storage.scenario_tables import ScenarioVersionRecord
from storage.scenarios import ScenarioChange
from storage.tables import ScenarioRecord

__all__ = [
    "SUBMITTER_WITHHELD",
    "list_scenarios",
    "load_scenarios",
    "register_scenario",
    "scenario",
    "scenario_public",
    "scenario_version",
    "scenario_versions",
    "store_scenarios",
    "update_scenario",
]

#: what a submitter's list of scenarios leaves out: the ground truth, its version, when
#: it last changed, and what an author may have written with it in view
SUBMITTER_WITHHELD = ("ground_truth", "version", "revision", "title", "tags", "updated_at")


def scenario_public(record: ScenarioRecord, principal: Principal) -> ScenarioPublic:
    """The scenario as ``principal`` may see it."""
    if principal.at_least("adjudicator"):
        return ScenarioPublic(
            id=record.id,
            set=record.scenario_set,
            ground_truth=record.ground_truth,
            version=record.version,
            revision=record.revision,
            title=record.title,
            tags=list(record.tags or []),
            created_at=record.created_at,
            updated_at=record.updated_at,
        )
    return ScenarioPublic(
        id=record.id,
        set=record.scenario_set,
        ground_truth=None,
        version=None,
        revision=None,
        title=None,
        tags=[],
        created_at=record.created_at,
        withheld=list(SUBMITTER_WITHHELD),
    )


#: a scenario's fields as the API names them, where the table names them otherwise
_API_FIELDS = {"scenario_set": "set"}


def _load_item(change: ScenarioChange) -> ScenarioLoadItem:
    """What writing one scenario did, as the API says it: ``changed`` names the fields
    as a request and a response do (``set``, not the column ``scenario_set``)."""
    record = change.scenario
    return ScenarioLoadItem(
        id=record.id,
        outcome=change.outcome,
        version=record.version,
        revision=record.revision,
        changed=[_API_FIELDS.get(name, name) for name in change.changed],
    )


def _version_public(record: ScenarioVersionRecord) -> ScenarioVersionPublic:
    return ScenarioVersionPublic(
        scenario_id=record.scenario_id,
        version=record.version,
        ground_truth=record.ground_truth,
        note=record.note,
        created_by=record.created_by,
        created_at=record.created_at,
    )


async def register_scenario(
    services: Services, principal: Principal, request: ScenarioCreate
) -> ScenarioRecord:
    """Store a scenario in ``principal``'s name as version 1; Conflict when the id exists."""
    max_bytes = services.settings.max_text_bytes
    check_text(request.ground_truth, field="ground_truth", max_bytes=max_bytes)
    return await services.store.scenarios.create(request.create_spec(), actor=principal.id)


async def scenario(services: Services, scenario_id: str) -> ScenarioRecord:
    """A registered scenario with its ground truth, else :class:`NotFound`."""
    record = await services.store.scenarios.get(scenario_id)
    if record is None:
        raise NotFound(f"no scenario with id {scenario_id!r}")
    return record


async def list_scenarios(
    services: Services,
    principal: Principal,
    filters: ScenarioFilter,
    *,
    cursor: str | None = None,
    limit: int = 50,
) -> ScenarioPage:
    """A page of scenarios in id order, as ``principal`` may see them."""
    rows, next_cursor = await ScenarioQueries(services.store.db).page(
        filters, after=cursor, limit=limit
    )
    return ScenarioPage(
        items=[scenario_public(r, principal) for r in rows], next_cursor=next_cursor
    )


async def update_scenario(
    services: Services,
    principal: Principal,
    scenario_id: str,
    request: ScenarioUpdate,
    *,
    expected_revision: int,
) -> ScenarioLoadItem:
    """Give a scenario a new ground truth (a new version) or new metadata.

    NotFound for an unknown id, PreconditionFailed when ``expected_revision`` is stale.
    """
    max_bytes = services.settings.max_text_bytes
    check_text(request.ground_truth, field="ground_truth", max_bytes=max_bytes)
    change = await services.store.scenarios.update(
        request.spec(scenario_id), expected_revision=expected_revision, actor=principal.id
    )
    return _load_item(change)


async def load_scenarios(
    services: Services, principal: Principal, text: str, *, fmt: LoadFormat | None = None
) -> ScenarioLoadReport:
    """Create or change every scenario of a JSONL or YAML load, in one transaction.

    Loading the same content again changes nothing: every item says ``unchanged``.
    The text is parsed and checked in a worker thread: a load of thousands of scenarios
    never holds up the gradings and requests that share the event loop.
    """
    max_bytes = services.settings.max_text_bytes
    items = await asyncio.to_thread(parse_scenarios, text, fmt=fmt, max_bytes=max_bytes)
    return await store_scenarios(services, principal, items)


async def store_scenarios(
    services: Services, principal: Principal, items: list[ScenarioCreate]
) -> ScenarioLoadReport:
    """Create or change the scenarios of a load already parsed and checked
    (:func:`~api.scenarios.loading.parse_scenarios`), in one transaction.

    For a caller that refuses a bad load before it opens the database at all (the
    command line: a refused file makes no database, no key and no migration).
    """
    changes = await services.store.scenarios.load(
        [item.create_spec() for item in items], actor=principal.id
    )
    done = [_load_item(c) for c in changes]
    return ScenarioLoadReport(items=done, counts=dict(Counter(i.outcome for i in done)))


async def scenario_versions(services: Services, scenario_id: str) -> ScenarioVersionList:
    """Every version of a scenario's ground truth, oldest first."""
    versions = await ScenarioQueries(services.store.db).versions(scenario_id)
    return ScenarioVersionList(
        scenario_id=scenario_id,
        current_version=versions[-1].version if versions else 0,
        items=[_version_public(v) for v in versions],
    )


async def scenario_version(
    services: Services, scenario_id: str, version: int
) -> ScenarioVersionPublic:
    """One version of a scenario's ground truth; NotFound for an unknown one."""
    return _version_public(await ScenarioQueries(services.store.db).version(scenario_id, version))
