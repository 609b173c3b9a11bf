"""Scenarios: ground truths registered once, listed, loaded in bulk and versioned.

Ids may hold slashes (SREGym's ``hotel/user-port``), so one path route serves a
scenario (``/v1/scenarios/{id}``), its versions (``.../versions``) and one version
(``.../versions/{n}``); no scenario id ends so (``ScenarioCreate`` refuses it).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

from litestar import Request, Response, get, post, put
from litestar.di import NamedDependency
from litestar.params import FromQuery, JSONBody, PathParameter, QueryParameter

from api.http.auth import require
from api.http.preconditions import expected_revision
from api.http.problems import ApiProblem
from api.http.uploads import file_operation
from api.scenarios.loading import LoadFormat, ScenarioLoad
from api.scenarios.queries import ScenarioFilter
from api.scenarios.schemas import (
    SCENARIO_ID_PATTERN,
    ScenarioCreate,
    ScenarioLoadItem,
    ScenarioLoadReport,
    ScenarioPage,
    ScenarioPublic,
    ScenarioUpdate,
    ScenarioVersionList,
    ScenarioVersionPublic,
)
from api.scenarios.use_cases import (
    list_scenarios,
    load_scenarios,
    register_scenario,
    scenario,
    scenario_public,
    scenario_version,
    scenario_versions,
    update_scenario,
)
from api.service.principal import Principal
from api.service.services import Services
from storage.errors import NotFound

__all__ = [
    "create_scenario",
    "get_scenario",
    "list_scenario_page",
    "load_scenario_file",
    "put_scenario",
]

_VERSIONS = re.compile(r"(?P<id>.+)/versions(?:/(?P<n>[0-9]{1,9}))?")
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")
_JSON: dict[str, LoadFormat] = {
    "application/json": "json",
    "application/jsonl": "jsonl",
    "application/x-ndjson": "jsonl",
}
#: the bulk load's body as the OpenAPI document describes it: its JSON form's schema,
#: text in each other media type
_LOAD = file_operation(
    "the scenarios: JSON Lines, a YAML list or a JSON list or object (text/plain: told by "
    "its content)",
    (*_JSON, *_YAML_TYPES, "text/plain"),
    json_body=ScenarioLoad,
)


def _etag(revision: int) -> dict[str, str]:
    return {"ETag": f'"{revision}"'}


@post("/v1/scenarios", guards=[require("admin")], operation_id="createScenario", status_code=201)
async def create_scenario(
    data: JSONBody[ScenarioCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> Response[ScenarioPublic]:
    """Register a scenario as version 1 of its ground truth (``Location``: its URL); 409
    when the id exists."""
    record = await register_scenario(services, principal, data)
    # an id may hold "/": its segments stay path segments (the route takes them whole)
    location = f"/v1/scenarios/{quote(record.id, safe='/:')}"
    headers = {**_etag(record.revision), "Location": location}
    return Response(scenario_public(record, principal), status_code=201, headers=headers)


@get(
    "/v1/scenarios",
    guards=[require("submitter")],
    operation_id="listScenarios",
    summary="Scenarios in id order, cursor-paginated",
)
async def list_scenario_page(
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    scenario_set: Annotated[
        str | None, QueryParameter(name="set", min_length=1, max_length=64)
    ] = None,
    id_prefix: Annotated[str | None, QueryParameter(min_length=1, max_length=128)] = None,
    created_after: FromQuery[datetime | None] = None,
    created_before: FromQuery[datetime | None] = None,
    cursor: FromQuery[str | None] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
) -> ScenarioPage:
    """Filter by ``set``, ``id_prefix`` and registration time (``created_after``
    inclusive). Submitters get ids, sets and registration times only: ground truths,
    versions, revisions, titles, tags and update times are for adjudicators and admins
    (``withheld`` names what went)."""
    filters = ScenarioFilter(
        scenario_set=scenario_set,
        id_prefix=id_prefix,
        created_after=created_after,
        created_before=created_before,
    )
    return await list_scenarios(services, principal, filters, cursor=cursor, limit=limit)


@post(
    "/v1/scenarios:bulk",
    guards=[require("admin")],
    operation_id="loadScenarios",
    operation_class=_LOAD,
    summary="Create or update many scenarios from JSON Lines or YAML (idempotent)",
    status_code=200,
)
async def load_scenario_file(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    fmt: Annotated[LoadFormat | None, QueryParameter(name="format", required=False)] = None,
) -> ScenarioLoadReport:
    """One scenario per JSON line (application/jsonl), a YAML list (application/yaml) or
    a JSON list or object (application/json); ``format`` overrides the Content-Type.
    All items are checked before any is stored (a key given twice in one object or
    mapping is refused, naming the item and the key), and all are stored in one
    transaction.
    Each item answers ``created``, ``unchanged``, ``new_version`` (its ground truth
    changed) or ``updated`` (title, tags or set)."""
    raw = await request.body()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiProblem(422, "Invalid request", "the body is not UTF-8", field="body") from None
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    chosen = fmt or ("yaml" if media in _YAML_TYPES else _JSON.get(media))
    return await load_scenarios(services, principal, text, fmt=chosen)


_PATH_LENGTH = 160
#: a scenario id (it may hold ``/``), or ``<id>/versions`` or ``<id>/versions/<n>``
ScenarioIdPath = Annotated[
    Path,
    PathParameter(
        schema_extra={"format": None, "pattern": SCENARIO_ID_PATTERN, "max_length": _PATH_LENGTH}
    ),
]


@get(
    "/v1/scenarios/{scenario_id:path}",
    guards=[require("adjudicator")],
    operation_id="getScenario",
    summary="A scenario, its ground-truth versions (.../versions) or one (.../versions/{n})",
)
async def get_scenario(
    scenario_id: ScenarioIdPath,
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> Response[ScenarioPublic | ScenarioVersionList | ScenarioVersionPublic]:
    """Adjudicators and admins only: a scenario with its ground truth (ETag: its
    revision), ``/versions`` every version oldest first, ``/versions/{n}`` one of them."""
    path = str(scenario_id).removeprefix("/")
    versions = _VERSIONS.fullmatch(path)
    if versions is not None and versions["n"] is not None:
        return Response(await scenario_version(services, versions["id"], int(versions["n"])))
    if versions is not None:
        return Response(await scenario_versions(services, versions["id"]))
    record = await scenario(services, path)
    return Response(scenario_public(record, principal), headers=_etag(record.revision))


@put(
    "/v1/scenarios/{scenario_id:path}",
    guards=[require("admin")],
    operation_id="updateScenario",
    summary="A new ground truth (a new version) or new metadata (If-Match required)",
)
async def put_scenario(
    scenario_id: ScenarioIdPath,
    data: JSONBody[ScenarioUpdate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    if_match: NamedDependency[str | None],
) -> Response[ScenarioLoadItem]:
    """A changed ground truth becomes a new version (old ones stay readable); a changed
    title, tag list or set is written in place. If-Match holds the scenario's ETag (its
    revision, which every change moves): 428 without it, 412 when another change came
    first."""
    path = str(scenario_id).removeprefix("/")
    if len(path) > _PATH_LENGTH or not re.fullmatch(SCENARIO_ID_PATTERN, path):  # none such
        raise NotFound(f"no scenario with id {path!r}")
    revision = expected_revision(if_match, what="scenario updates need If-Match with its ETag")
    done = await update_scenario(services, principal, path, data, expected_revision=revision)
    return Response(done, headers=_etag(done.revision))
