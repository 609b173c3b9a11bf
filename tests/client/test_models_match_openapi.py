"""The client's typed models against the server's OpenAPI document: they cannot drift."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy.engine import Engine
from sre_judge_client import models

from api.http.app import create_app
from api.service.settings import Settings
from tests.support.app_client import AppClient

#: server schema name -> client model
PAIRS = {
    "GradingPublic": models.Grading,
    "GradingPage": models.GradingPage,
    "AnswerPublic": models.Answer,
    "DimensionPublic": models.Dimension,
    "SubmissionPublic": models.Submission,
    "OverridePublic": models.Override,
    "TagPublic": models.Tag,
    "VotePublic": models.Vote,
    "ScenarioPublic": models.Scenario,
    "ScenarioPage": models.ScenarioPage,
    "ScenarioVersionPublic": models.ScenarioVersion,
    "ScenarioVersionList": models.ScenarioVersions,
    "ScenarioLoadItem": models.ScenarioLoadItem,
    "ScenarioLoadReport": models.ScenarioLoadReport,
    "ImportJobPublic": models.ImportJob,
    "ImportRowError": models.ImportRowError,
}


def _kinds(schema: dict[str, Any]) -> frozenset[str]:
    """The JSON types a property schema admits (a reference counts as an object)."""
    if "$ref" in schema:
        return frozenset({"object"})
    kinds: set[str] = set()
    for key in ("anyOf", "oneOf", "allOf"):
        for part in schema.get(key, []):
            kinds |= _kinds(part)
    declared = schema.get("type")
    if isinstance(declared, str):
        kinds.add(declared)
    elif isinstance(declared, list):
        kinds.update(declared)
    if None in schema.get("enum", []):
        kinds.add("null")
    return frozenset(kinds)


def _enums(schema: dict[str, Any]) -> frozenset[Any]:
    values: set[Any] = set(schema.get("enum", []))
    if "const" in schema:
        values.add(schema["const"])
    for key in ("anyOf", "oneOf"):
        for part in schema.get(key, []):
            values |= _enums(part)
    return frozenset(values - {None})  # null is a kind, compared above


@pytest.fixture
async def openapi(database_url: str, engine: Engine) -> dict[str, Any]:
    """The server's OpenAPI document as ``/schema/openapi.json`` serves it."""
    settings = Settings(database_url=database_url, judge="scripted:pass")
    app = create_app(settings, engine=engine, start_workers=False)
    async with AppClient(app) as client:
        response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    return dict(response.json())


#: server schema name -> the narrower schemas a submitter may get of the same object
#: (``SRE_JUDGE_SUBMITTER_VIEW``): the client model reads them all, so a field they leave
#: out has a default in the client
NARROWER = {
    "GradingPublic": ("SubmitterGradingVerdict", "SubmitterGradingAnswers"),
    "AnswerPublic": ("SubmitterAnswer",),
    "SubmissionPublic": ("SubmitterSubmission",),
}


@pytest.mark.parametrize("server_name", sorted(PAIRS))
async def test_the_client_model_matches_the_servers_schema(
    openapi: dict[str, Any], server_name: str
) -> None:
    schemas = openapi["components"]["schemas"]
    server = schemas[server_name]
    narrower = [schemas[name] for name in NARROWER.get(server_name, ())]
    client_model: type[BaseModel] = PAIRS[server_name]
    client = client_model.model_json_schema()
    assert set(client["properties"]) == set(server["properties"]), server_name
    required = set(server.get("required", []))
    for view in narrower:
        assert set(view["properties"]) <= set(server["properties"]), server_name
        required &= set(view.get("required", []))
    assert set(client.get("required", [])) == required, server_name
    for name, prop in server["properties"].items():
        mine = client["properties"][name]
        where = f"{server_name}.{name}"
        # a field some view leaves out may be null in the client (its default)
        assert _kinds(mine) - {"null"} == _kinds(prop) - {"null"}, where
        assert "null" not in _kinds(prop) or "null" in _kinds(mine), where
        assert "null" not in _kinds(mine) - _kinds(prop) or name not in required, where
        views = [prop, *(v["properties"][name] for v in narrower if name in v["properties"])]
        assert _enums(mine) == frozenset().union(*map(_enums, views)), where
