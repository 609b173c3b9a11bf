"""The served OpenAPI document: bearer auth, a description for every operation, and every
error answer a route can give listed with the problem+json shape.

What a route can give is read from the route itself, not from the document's builder:
its guards (401, 403), its path parameters (404), its parameters and body (422; 400, 413
and 415 for a body), and the statuses its handler's source writes (``ApiProblem(409, ...``,
``status_code=...``). Schemathesis' status-code check in ``test_fuzz_routes`` finds the
ones raised deeper down. What the server sends (a not-ready ``/readyz``, an archive) is
compared with what the document lists for it.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest
from litestar.handlers import HTTPRouteHandler
from sqlalchemy.engine import Engine

from api.app import route_handlers
from tests.support.outage import queue_queries_fail

PROBLEM = {"$ref": "#/components/schemas/Problem"}
#: statuses a handler writes itself (a 500 "cannot happen" is no answer it promises)
_LITERAL_STATUS = re.compile(r"(?:ApiProblem\(\s*|status_code=)([1-4]\d\d|50[34])\b")


def _operations(document: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        operation["operationId"]: (path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "put", "post", "delete", "patch", "head")
    }


def _can_answer(handler: HTTPRouteHandler, path: str, operation: dict[str, Any]) -> set[int]:
    """The statuses this route can answer, read from the route's own declarations."""
    statuses = {int(s) for s in _LITERAL_STATUS.findall(inspect.getsource(handler.fn))}
    if any("guard" in getattr(g, "__qualname__", "") for g in handler.guards or []):
        statuses |= {401, 403}
    if "{" in path:
        statuses.add(404)
    if operation.get("parameters") or "requestBody" in operation:
        statuses.add(422)
    if "requestBody" in operation:
        statuses |= {400, 413, 415}
    if any(p["name"] == "If-Match" for p in operation.get("parameters", [])):
        statuses |= {412, 428}
    return statuses


async def test_every_operation_is_described_and_lists_its_error_answers(
    api_client: Any,
) -> None:
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
        docs_page = await client.get("/schema")
        home = await client.get("/", follow_redirects=False)
    scheme = document["components"]["securitySchemes"]["bearer"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    problem = document["components"]["schemas"]["Problem"]
    assert set(problem["required"]) == {"type", "title", "status", "detail"}
    assert "errors" in problem["properties"]
    operations = _operations(document)
    handlers = [h for h in route_handlers() if isinstance(h, HTTPRouteHandler)]
    missing: list[str] = []
    for handler in handlers:
        if handler.operation_id not in operations:
            continue
        path, operation = operations[str(handler.operation_id)]
        if not (operation.get("description") or "").strip():
            missing.append(f"{handler.operation_id}: no description")
        for status in sorted(_can_answer(handler, path, operation)):
            answer = operation["responses"].get(str(status))
            if answer is None:
                missing.append(f"{handler.operation_id}: {status} not documented")
            elif status >= 400 and answer["content"]["application/problem+json"]["schema"] != (
                PROBLEM
            ):
                missing.append(f"{handler.operation_id}: {status} is not problem+json")
        if any(status in operation["responses"] for status in ("401", "403")):
            assert operation.get("security") == [{"bearer": []}], handler.operation_id
    assert not missing, "\n".join(missing)
    assert len(operations) >= 40
    assert docs_page.status_code == 200
    # `/` leads to the workbench: its sign-in page without a session
    assert home.status_code in (302, 303) and home.headers["location"].startswith("/login")


async def test_the_statuses_a_route_writes_are_found_in_its_source(api_client: Any) -> None:
    """The check above reads 409, 412 and 428 from the override route's own code."""
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
    path, operation = _operations(document)["createOverride"]
    handler = next(
        h
        for h in route_handlers()
        if isinstance(h, HTTPRouteHandler) and h.operation_id == "createOverride"
    )
    assert {401, 403, 404, 412, 422, 428} <= _can_answer(handler, path, operation)


async def test_a_not_ready_readyz_is_documented_as_it_is_sent(
    api_client: Any, engine: Engine
) -> None:
    """A client or uptime checker generated from the document reads a not-ready
    ``GET /readyz`` (503) as the readiness body it is, in the media type it comes in, with
    no ``Retry-After`` promised; ``HEAD /readyz`` lists its 503 too."""
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
        with queue_queries_fail(engine):
            answer = await client.get("/readyz")
            probed = await client.head("/readyz")
    assert answer.status_code == probed.status_code == 503, answer.text
    get, head = document["paths"]["/readyz"]["get"], document["paths"]["/readyz"]["head"]
    media_type = answer.headers["content-type"].split(";")[0]
    not_ready = get["responses"]["503"]
    assert not_ready["content"][media_type] == get["responses"]["200"]["content"][media_type]
    assert "Retry-After" not in not_ready.get("headers", {})
    assert "503" in head["responses"]


@pytest.mark.parametrize("path", ["/schema/redoc", "/schema/swagger", "/schema/typo"])
async def test_an_unknown_path_under_the_document_is_a_problem(api_client: Any, path: str) -> None:
    """A path under ``/schema`` that serves nothing (a documentation page this service
    does not have, a typo) is a 404 problem, as every other unknown path is."""
    async with api_client(start_workers=False) as client:
        answer = await client.get(path)
    assert answer.status_code == 404
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.text
    assert answer.json()["status"] == 404


@pytest.mark.parametrize("method", ["HEAD", "DELETE", "POST", "OPTIONS"])
async def test_an_unknown_path_under_the_document_is_a_404_whatever_the_method(
    api_client: Any, method: str
) -> None:
    """Any method on a path under ``/schema`` that serves nothing answers 404, as it does
    on an unknown path elsewhere: not a 405 that advertises a ``GET`` finding nothing."""
    async with api_client(start_workers=False) as client:
        elsewhere = await client.request(method, "/v1/typo")
        answer = await client.request(method, "/schema/typo")
    assert elsewhere.status_code == 404
    assert answer.status_code == 404, (answer.status_code, answer.headers.get("allow"))
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert "allow" not in answer.headers  # a path that serves nothing allows nothing


async def test_every_export_media_type_is_documented(api_client: Any, tokens: Any) -> None:
    """The archives of ``GET /v1/exports/gradings`` (``format=sregym&layout=folder``,
    ``archive=zip``) are listed under their media types, as bytes, so a generated client
    or schemathesis' content-type check takes them."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        document = (await client.get("/schema/openapi.json")).json()
        documented = document["paths"]["/v1/exports/gradings"]["get"]["responses"]["200"]["content"]
        served = {}
        for query in ("format=sregym&layout=folder", "format=sregym&archive=zip"):
            answer = await client.get(f"/v1/exports/gradings?{query}", headers=admin)
            assert answer.status_code == 200, answer.text
            served[query] = answer.headers["content-type"].split(";")[0]
    missing = {q: m for q, m in served.items() if m not in documented}
    assert not missing, (missing, sorted(documented))
    assert all(documented[m]["schema"].get("format") == "binary" for m in served.values())
