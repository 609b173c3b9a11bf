"""The OpenAPI document states the rules the server applies, and the server applies no
rule the document hides: request bodies carry their models' patterns, bounds and
``additionalProperties: false``; strings forbid NUL; enums and lists are spelled out;
``OPTIONS`` lists every method of a path. (``test_fuzz_routes`` sends what schemathesis
generates from the document; these pin the rules one by one.)"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs
import pytest

from api.http.openapi_schemas import NO_NUL
from tests.support.submissions import DIAGNOSIS, TRUTH


async def _document(api_client: Any) -> dict[str, Any]:
    async with api_client(start_workers=False) as client:
        return dict((await client.get("/schema/openapi.json")).json())


def _valid(document: dict[str, Any], schema: dict[str, Any], instance: Any) -> bool:
    """Whether ``instance`` is valid under ``schema``, a part of ``document`` whose
    references point into it."""
    return bool(jsonschema_rs.is_valid({**schema, "components": document["components"]}, instance))


def _body_schema(document: dict[str, Any], path: str, method: str = "post") -> dict[str, Any]:
    ref = document["paths"][path][method]["requestBody"]["content"]["application/json"]
    name = ref["schema"]["$ref"].rsplit("/", 1)[1]
    return dict(document["components"]["schemas"][name])


async def test_request_bodies_state_what_their_models_enforce(api_client: Any) -> None:
    document = await _document(api_client)
    tag = _body_schema(document, "/v1/failure-tags")
    assert tag["additionalProperties"] is False
    assert tag["properties"]["tag"]["pattern"] == "^[a-z0-9][a-z0-9-]*$"
    claim = _body_schema(document, "/v1/review-queue/{grading_id}/claim")
    minutes = next(s for s in claim["properties"]["minutes"]["anyOf"] if s["type"] == "number")
    assert minutes["exclusiveMinimum"] == 0
    labels = _body_schema(document, "/v1/gradings/{grading_id}/labels")["properties"]["answers"]
    assert labels["type"] == "object"
    assert labels["additionalProperties"]["enum"] == ["yes", "no"]
    assert labels["propertyNames"]["pattern"] == NO_NUL


async def test_exactly_one_of_several_fields_is_stated(api_client: Any) -> None:
    document = await _document(api_client)
    submission = _body_schema(document, "/v1/submissions")
    assert [b["required"] for b in submission["oneOf"]] == [["scenario_id"], ["ground_truth"]]
    override = _body_schema(document, "/v1/gradings/{grading_id}/overrides")
    kinds = [b["required"] for b in override["oneOf"]]
    assert kinds == [["question_id", "answer"], ["verdict"], ["withdraw"]]
    assert override["oneOf"][1]["properties"]["withdraw"] == {"type": "null"}


async def test_free_text_forbids_nul_and_lists_are_spelled_out(api_client: Any) -> None:
    document = await _document(api_client)
    submission = _body_schema(document, "/v1/submissions")
    assert submission["properties"]["diagnosis"]["pattern"] == NO_NUL
    params = {p["name"]: p for p in document["paths"]["/v1/stats/pass-rates"]["get"]["parameters"]}
    assert params["agent"]["schema"]["oneOf"][0]["pattern"] == NO_NUL
    group_by = re.compile(params["group_by"]["schema"]["pattern"])
    assert group_by.fullmatch("agent,model,agent") and group_by.fullmatch("")
    assert not group_by.fullmatch("agent, model") and not group_by.fullmatch("colour")
    queue = {p["name"]: p for p in document["paths"]["/v1/review-queue"]["get"]["parameters"]}
    assert "evidence_unverified" in queue["reason"]["schema"]["enum"]
    update = document["paths"]["/v1/scenarios/{scenario_id}"]["put"]["parameters"]
    assert next(p for p in update if p["name"] == "If-Match")["required"] is True


async def test_a_map_key_holding_a_nul_is_refused_by_the_document_as_by_the_server(
    api_client: Any, tokens: Any
) -> None:
    """Every key of a free-form object (a submission's ``metadata``, a step of its
    ``trace``) carries the pattern that forbids NUL, as the server refuses one (422 naming
    it): a body the document calls valid is one the server takes."""
    admin = await tokens("admin")
    metadata = {"a\u0000b": 1}
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
        refused = await client.post(
            "/v1/submissions",
            json={"diagnosis": "d", "ground_truth": "g", "metadata": metadata},
            headers=admin,
        )
    assert refused.status_code == 422
    assert refused.json()["errors"][0]["field"].startswith("metadata.")
    submission = document["components"]["schemas"]["SubmissionCreate"]["properties"]
    assert not _valid(document, submission["metadata"], metadata)
    assert _valid(document, submission["metadata"], {"ab": 1})
    assert not _valid(document, submission["trace"], [metadata])


async def test_the_bulk_load_documents_the_json_it_takes(api_client: Any, tokens: Any) -> None:
    """``POST /v1/scenarios:bulk`` documents its ``application/json`` body as the
    scenarios it takes (a list, ``{"scenarios": [...]}`` or one), so a client generated
    from the document sends what the server loads; JSON Lines and YAML stay text."""
    admin = await tokens("admin")
    item = {"id": "hotel/user-port", "ground_truth": TRUTH}
    forms = [[item], {"scenarios": [item]}, item]
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
        content = document["paths"]["/v1/scenarios:bulk"]["post"]["requestBody"]["content"]
        loaded = [
            await client.post(
                "/v1/scenarios:bulk",
                content=json.dumps(form),
                headers={**admin, "Content-Type": "application/json"},
            )
            for form in [*forms, json.dumps([item])]
        ]
    schema = content["application/json"]["schema"]
    assert [answer.status_code for answer in loaded] == [200, 200, 200, 422], loaded[-1].text
    assert all(_valid(document, schema, form) for form in forms), schema
    assert not _valid(document, schema, json.dumps([item]))  # a JSON string is no load
    assert not _valid(document, schema, [])  # nor is an empty one
    assert content["application/jsonl"]["schema"] == {"type": "string"}


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/v1/failure-tags", "GET, OPTIONS, POST"),
        ("/v1/tokens", "GET, OPTIONS, POST"),
        ("/v1/webhooks", "GET, OPTIONS, POST"),
        ("/v1/scenarios", "GET, OPTIONS, POST"),
        ("/v1/scenarios/some/id", "GET, OPTIONS, PUT"),
    ],
)
async def test_options_lists_every_method_of_the_path(
    api_client: Any, path: str, methods: str
) -> None:
    async with api_client(start_workers=False) as client:
        answer = await client.options(path)
    assert answer.status_code == 204
    assert answer.headers["allow"] == methods


async def test_the_server_accepts_what_the_document_allows(api_client: Any, tokens: Any) -> None:
    """A repeated group_by name, an empty cursor, an id no scenario can have."""
    admin = await tokens("admin")
    async with api_client() as client:
        await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=admin,
        )
        rates = await client.get("/v1/stats/pass-rates?group_by=agent,agent", headers=admin)
        spaced = await client.get("/v1/stats/pass-rates?group_by=agent,%20model", headers=admin)
        first_page = await client.get("/v1/gradings?cursor=", headers=admin)
        impossible = await client.put(
            "/v1/scenarios/-dash", json={"ground_truth": TRUTH}, headers=admin
        )
    assert rates.status_code == 200 and rates.json()["group_by"] == ["agent"]
    assert spaced.status_code == 422 and spaced.json()["errors"][0]["field"] == "group_by"
    assert first_page.status_code == 200 and len(first_page.json()["items"]) == 1
    assert impossible.status_code == 404, impossible.text


async def test_a_date_in_a_body_is_text_not_a_number(api_client: Any, tokens: Any) -> None:
    admin = await tokens("admin")
    async with api_client() as client:
        answer = await client.post(
            "/v1/regrade-jobs",
            json={"filter": {"created_before": 0}, "judge": "scripted:pass", "dry_run": True},
            headers=admin,
        )
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["field"].endswith("created_before")
