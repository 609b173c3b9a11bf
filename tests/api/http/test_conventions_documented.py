"""The HTTP API's shared conventions on every resource: problems name a field as the
client sent it, the OpenAPI document lists what the routes answer (bodies, statuses,
the Location and ETag headers clients follow), a 201 names what it made, no answer
is kept by a cache, and a ``HEAD`` answer states no length its ``GET`` does not send."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.submissions import graded

TRUTH = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT=7777 while svc 8083"


async def _document(client: Any) -> dict[str, Any]:
    answer = await client.get("/schema/openapi.json")
    assert answer.status_code == 200
    return answer.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("GET", "/v1/scenarios?set=", "set"),
        ("GET", "/v1/webhooks/w1/deliveries?state=bogus", "state"),
        ("POST", "/v1/scenarios:bulk?format=xml", "format"),
    ],
)
async def test_a_bad_query_parameter_is_named_as_sent_not_as_the_handler_calls_it(
    api_client: Any, tokens: Any, method: str, path: str, field: str
) -> None:
    """A problem names a query parameter as the client sent it (``set``, ``state``,
    ``format``), never as the handler calls it."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        answer = await client.request(
            method, path, content=b"[]", headers={**admin, "content-type": "application/json"}
        )
    assert answer.status_code == 422, answer.text
    assert [e["field"] for e in answer.json()["errors"]] == [field], answer.text


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/v1/gradings?limit=0", None, 422),
        ("GET", "/v1/gradings?limit=0&agent=malformed-input-bot", None, 422),
        ("GET", "/v1/gradings?limit=0&q=malformed", None, 422),
        ("PUT", "/v1/scenarios/hotel/geo", b'{"ground_truth": 5}', 422),
        ("PUT", "/v1/scenarios/hotel/malformed-config", b'{"ground_truth": 5}', 422),
        ("PUT", "/v1/scenarios/hotel/geo", b"{not json", 400),
        ("PUT", "/v1/scenarios/hotel/malformed-config", b"{not json", 400),
    ],
)
async def test_an_invalid_value_is_422_and_a_body_that_is_not_json_is_400(
    api_client: Any, tokens: Any, method: str, path: str, body: bytes | None, status: int
) -> None:
    """A parameter or a body's value that fails validation is a 422 and a body that is
    not JSON at all a 400, whatever words the URL holds (a search, an agent name or a
    scenario id saying "malformed")."""
    admin = await tokens("admin")
    headers = {**admin, "content-type": "application/json", "If-Match": '"1"'}
    async with api_client(start_workers=False) as client:
        answer = await client.request(method, path, content=body, headers=headers)
    assert answer.status_code == status, answer.text
    assert answer.json()["status"] == status, answer.text


@pytest.mark.parametrize("path", ["/v1/scenarios", "/v1/tokens", "/v1/webhooks"])
async def test_a_missing_body_is_a_problem_naming_the_body(
    api_client: Any, tokens: Any, path: str
) -> None:
    """A POST without its JSON body names ``body`` and says that one is required."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        answer = await client.post(path, headers={**admin, "content-type": "application/json"})
    assert answer.status_code in (400, 422), answer.text
    errors = answer.json()["errors"]
    assert errors[0]["field"] == "body", answer.text
    assert errors[0]["message"] != "'data'", answer.text


async def test_the_bulk_load_documents_its_request_body(api_client: Any) -> None:
    """``POST /v1/scenarios:bulk`` documents its required body (JSON Lines, YAML or
    JSON), so generated clients and the fuzzer send one."""
    async with api_client(start_workers=False) as client:
        operation = (await _document(client))["paths"]["/v1/scenarios:bulk"]["post"]
    assert operation.get("requestBody"), json.dumps(operation)[:400]


@pytest.mark.parametrize(
    ("path", "operation", "content_type", "body", "status"),
    [
        ("/v1/scenarios:bulk", "/v1/scenarios:bulk", "application/xml", b"<a/>", 415),
        ("/v1/scenarios:bulk", "/v1/scenarios:bulk", "application/json", b"x" * 5000, 413),
        ("/v1/review-queue/g1/done", "/v1/review-queue/{grading_id}/done", "text/plain",
         b"hi", 415),
        ("/v1/regrade-jobs/j1/pause", "/v1/regrade-jobs/{job_id}/pause", "application/json",
         b"x" * 5000, 413),
    ],
)  # fmt: skip
async def test_every_status_a_route_answers_is_listed_in_the_document(
    api_client: Any, tokens: Any, path: str, operation: str, content_type: str, body: bytes,
    status: int,
) -> None:  # fmt: skip
    """Every status a route answers is in the document: 413 and 415 (the app-wide body
    guards) on every write, with a body or not."""
    admin = await tokens("admin")
    async with api_client(start_workers=False, max_body_bytes=4096) as client:
        answer = await client.post(
            path, content=body, headers={**admin, "content-type": content_type}
        )
        responses = (await _document(client))["paths"][operation]["post"]["responses"]
    assert answer.status_code == status, answer.text
    assert str(status) in responses, sorted(responses)


async def test_a_registered_scenario_answers_201_with_its_location(
    api_client: Any, tokens: Any
) -> None:
    """A 201 names what it created in ``Location`` (RFC 9110 15.3.2): a new scenario
    gives ``/v1/scenarios/{id}``, as submissions, imports and regrade jobs give theirs."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/geo", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        assert made.headers.get("location") == "/v1/scenarios/hotel/geo", dict(made.headers)
        again = await client.get(made.headers["location"], headers=admin)
    assert again.status_code == 200


async def test_an_override_and_a_tag_answer_201_with_the_grading_that_shows_them(
    api_client: Any, tokens: Any
) -> None:
    """An override and a failure tag are read in the grading object: their 201 names it
    in ``Location``."""
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    async with api_client() as client:
        grading = await graded(client, admin)
        url = f"/v1/gradings/{grading['id']}"
        etag = (await client.get(url, headers=adjudicator)).headers["etag"]
        overridden = await client.post(
            f"{url}/overrides",
            json={"verdict": "fail", "reason": "the diagnosis names the wrong service"},
            headers={**adjudicator, "If-Match": etag},
        )
        tagged = await client.post(
            f"{url}/tags", json={"tag": "misread-unit", "note": "units"}, headers=adjudicator
        )
        shown = (await client.get(url, headers=adjudicator)).json()
    assert overridden.status_code == tagged.status_code == 201, (overridden.text, tagged.text)
    assert overridden.headers["location"] == tagged.headers["location"] == url
    assert shown["overrides"] and shown["tags"]


@pytest.mark.parametrize(
    ("path", "method", "status", "header"),
    [
        ("/v1/submissions", "post", "202", "Location"),
        ("/v1/imports", "post", "202", "Location"),
        ("/v1/regrade-jobs", "post", "201", "Location"),
        ("/v1/gradings/{grading_id}", "get", "200", "ETag"),
        ("/v1/scenarios/{scenario_id}", "put", "200", "ETag"),
        ("/v1/gradings/{grading_id}/overrides", "post", "201", "Location"),
        ("/v1/gradings/{grading_id}/tags", "post", "201", "Location"),
        ("/v1/submissions", "post", "201", "Idempotent-Replayed"),
        # a limit, a full queue or a database away: when to send it again
        ("/v1/submissions", "post", "429", "Retry-After"),
        ("/v1/submissions", "post", "503", "Retry-After"),
    ],
)
async def test_the_document_declares_the_headers_clients_follow(
    api_client: Any, path: str, method: str, status: str, header: str
) -> None:
    """The document declares the ``Location`` clients follow after a 201/202 and the
    ``ETag`` they send back as ``If-Match``."""
    async with api_client(start_workers=False) as client:
        document = await _document(client)
    response = document["paths"][path][method]["responses"][status]
    declared = {name.lower() for name in response.get("headers", {})}
    assert header.lower() in declared, sorted(declared)


async def test_answers_holding_a_ground_truth_or_a_secret_are_not_stored_by_caches(
    api_client: Any, tokens: Any
) -> None:
    """Answers holding a ground truth or a secret (a scenario and its versions, a new
    token) say ``Cache-Control: no-store``, as workbench pages do: no browser cache or
    proxy keeps them."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        made = await client.post(
            "/v1/scenarios", json={"id": "hotel/geo", "ground_truth": TRUTH}, headers=admin
        )
        assert made.status_code == 201, made.text
        answers = {
            "scenario": await client.get("/v1/scenarios/hotel/geo", headers=admin),
            "versions": await client.get("/v1/scenarios/hotel/geo/versions", headers=admin),
            "token": await client.post(
                "/v1/tokens", json={"name": "ci", "role": "submitter"}, headers=admin
            ),
        }
    for name, answer in answers.items():
        assert answer.status_code in (200, 201), (name, answer.text)
    missing = [
        n for n, a in answers.items() if "no-store" not in a.headers.get("cache-control", "")
    ]
    assert missing == [], missing


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_a_head_answer_states_no_length_but_that_of_get(api_client: Any, path: str) -> None:
    """``HEAD /healthz`` and ``HEAD /readyz`` (uptime checks) answer GET's status with no
    ``Content-Length`` or GET's own (RFC 9110 8.6), never the length of another body."""
    async with api_client(start_workers=False) as client:
        got = await client.get(path)
        headed = await client.head(path)
    assert headed.status_code == got.status_code
    length = headed.headers.get("content-length")
    assert length is None or int(length) == len(got.content), (length, len(got.content))
