"""Every route of the app's route table x every role, plus no token, a revoked and an expired one.

The routes come from the app itself (``app.routes``), so a route added without a line in
``EXPECTED`` fails here: say who may call it before shipping it. Each line gives the
answer per principal (``OK`` is any 2xx); principals without a usable token get 401
unless the line says otherwise. Path parameters are filled by name from the fixtures
the test creates (a grading of "submitter", a scenario, an empty regrade job).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from litestar import Litestar
from sqlalchemy import update
from sqlalchemy.engine import Engine

from api.http.app import create_app
from api.service.settings import Settings
from storage import Store, TokenRecord
from storage.canonical import utcnow
from tests.support.keys import session_key

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999."
TOKENLESS = ["none", "revoked", "expired"]
PRINCIPALS = [*TOKENLESS, "submitter", "other-submitter", "adjudicator", "admin"]
OK = "2xx"
DRY_RUN = {"judge": "scripted:fail", "dry_run": True}
#: a real job that covers nothing (a dry run stores no job to address)
EMPTY_JOB = {"judge": "scripted:fail", "filter": {"agent": "nobody-has-this-agent"}}


def roles(submitter: Any, adjudicator: Any, admin: Any, *, other: Any = None) -> dict[str, Any]:
    """Expected answers per role; ``other`` (a second submitter) as ``submitter`` unless given."""
    return {
        "submitter": submitter,
        "other-submitter": submitter if other is None else other,
        "adjudicator": adjudicator,
        "admin": admin,
    }


ANY_TOKEN = roles(OK, OK, OK)
ADJUDICATOR_UP = roles(403, OK, OK)
ADMIN_ONLY = roles(403, 403, OK)
ANYONE = {principal: OK for principal in PRINCIPALS}


@dataclass(frozen=True)
class Expect:
    """One route's expected answer per principal, and how to call it."""

    by_principal: Mapping[str, Any]
    body: Any = None
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    def status(self, principal: str) -> Any:
        """``OK`` or a status code; 401 for a principal the line does not name."""
        return self.by_principal.get(principal, 401)


#: (method, path as in the route table, parameters without their types) -> who gets what
EXPECTED: dict[tuple[str, str], Expect] = {
    ("GET", "/healthz"): Expect(ANYONE),
    ("GET", "/readyz"): Expect(ANYONE),
    ("HEAD", "/healthz"): Expect(ANYONE),
    ("HEAD", "/readyz"): Expect(ANYONE),
    ("GET", "/metrics"): Expect(ANYONE),
    ("GET", "/schema"): Expect(ANYONE),
    ("GET", "/schema/openapi.json"): Expect(ANYONE),
    **{  # an unknown document path, whatever the method
        (method, "/schema/{path}"): Expect({principal: 404 for principal in PRINCIPALS})
        for method in ("DELETE", "GET", "HEAD", "PATCH", "POST", "PUT", "TRACE")
    },
    # the workbench takes no bearer token: without a session cookie each page sends the
    # browser to sign in (the redirect is followed here: the sign-in form answers 200)
    ("GET", "/"): Expect(ANYONE),
    ("GET", "/login"): Expect(ANYONE),
    ("POST", "/login"): Expect({principal: 403 for principal in PRINCIPALS}),  # no form CSRF
    ("POST", "/logout"): Expect(ANYONE),
    ("GET", "/queue"): Expect(ANYONE),
    ("GET", "/queue/next"): Expect(ANYONE),
    ("GET", "/gradings"): Expect(ANYONE),
    ("GET", "/gradings/{grading_id}"): Expect(ANYONE),
    ("GET", "/gradings/{first}/versus/{second}"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/overrides"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/done"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/skip"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/assign"): Expect(ANYONE),
    ("GET", "/gradings/{grading_id}/label"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/label"): Expect(ANYONE),
    ("GET", "/gradings/{grading_id}/label/saved"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/tags"): Expect(ANYONE),
    ("POST", "/gradings/{grading_id}/tags/{tag_id}/remove"): Expect(ANYONE),
    ("GET", "/reports"): Expect(ANYONE),
    ("GET", "/reports/compare"): Expect(ANYONE),
    ("GET", "/reports/agreement"): Expect(ANYONE),
    ("GET", "/reports/table"): Expect(ANYONE),
    ("GET", "/reports/table.csv"): Expect(ANYONE),
    ("GET", "/regrades"): Expect(ANYONE),
    ("GET", "/regrades/{job_id}"): Expect(ANYONE),
    ("GET", "/regrades/{job_id}/progress"): Expect(ANYONE),
    ("GET", "/regrades/{job_id}/flips.csv"): Expect(ANYONE),
    ("POST", "/regrades/{job_id}/{action}"): Expect(ANYONE),
    ("GET", "/judges"): Expect(ANYONE),
    # file_path is the workbench's favicon.svg, which Swagger UI's folder does not have
    ("GET", "/static/web/{file_path}"): Expect(ANYONE),
    ("HEAD", "/static/web/{file_path}"): Expect(ANYONE),
    ("GET", "/static/swagger-ui/{file_path}"): Expect({p: 404 for p in PRINCIPALS}),
    ("HEAD", "/static/swagger-ui/{file_path}"): Expect({p: 404 for p in PRINCIPALS}),
    ("POST", "/v1/submissions"): Expect(
        ANY_TOKEN, body={"diagnosis": DIAGNOSIS, "ground_truth": "their own truth"}
    ),
    ("GET", "/v1/gradings"): Expect(ANY_TOKEN),
    ("GET", "/v1/gradings/{grading_id}"): Expect(roles(OK, OK, OK, other=404)),
    ("POST", "/v1/gradings/{grading_id}/overrides"): Expect(
        roles(403, 412, 412),
        body={"verdict": "fail", "reason": "role matrix"},
        headers={"If-Match": '"0"'},
    ),
    ("GET", "/v1/gradings/{grading_id}/history"): Expect(ADJUDICATOR_UP),
    ("POST", "/v1/gradings:move-judge"): Expect(
        ADMIN_ONLY, body={"from_judge": "openai:gone@http://127.0.0.1:9/v1"}
    ),
    ("POST", "/v1/gradings/{grading_id}/labels"): Expect(
        ADJUDICATOR_UP, body={"answers": {"D1-Q1": "yes"}}
    ),
    ("POST", "/v1/gradings/{grading_id}/tags"): Expect(
        ADJUDICATOR_UP, body={"tag": "misread-unit"}
    ),
    ("DELETE", "/v1/gradings/{grading_id}/tags/{tag_id}"): Expect(roles(403, 404, 404)),
    ("GET", "/v1/review-queue"): Expect(ADJUDICATOR_UP),
    ("POST", "/v1/review-queue/{grading_id}/claim"): Expect(ADJUDICATOR_UP, body={}),
    ("POST", "/v1/review-queue/{grading_id}/done"): Expect(ADJUDICATOR_UP),
    ("POST", "/v1/review-queue/{grading_id}/skip"): Expect(ADJUDICATOR_UP, body={"note": "x"}),
    # "adjudicator" is the name of the adjudicator's token
    ("POST", "/v1/review-queue/{grading_id}/assign"): Expect(
        ADJUDICATOR_UP, body={"assignee": "adjudicator"}
    ),
    ("GET", "/v1/failure-tags"): Expect(ADJUDICATOR_UP),
    ("POST", "/v1/failure-tags"): Expect(
        ADMIN_ONLY, body={"tag": "new-tag", "description": "a new tag"}
    ),
    ("POST", "/v1/scenarios"): Expect(ADMIN_ONLY, body={"id": "s-new", "ground_truth": "x"}),
    ("GET", "/v1/scenarios/{scenario_id}"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/scenarios"): Expect(ANY_TOKEN),
    ("POST", "/v1/scenarios:bulk"): Expect(
        ADMIN_ONLY, body=[{"id": "s-bulk", "ground_truth": "x", "set": "held-out"}]
    ),
    ("PUT", "/v1/scenarios/{scenario_id}"): Expect(
        roles(403, 403, 412), body={"ground_truth": "y"}, headers={"If-Match": '"0"'}
    ),
    ("GET", "/v1/rubrics"): Expect(ANY_TOKEN),
    ("GET", "/v1/rubrics/{rubric_id}"): Expect(ANY_TOKEN),
    ("GET", "/v1/stats/pass-rates"): Expect(ADJUDICATOR_UP, query="?group_by=agent"),
    # arms with no gradings: past the guard, an empty arm is a 422 naming it
    ("GET", "/v1/stats/compare"): Expect(roles(403, 422, 422), query="?a.model=x&b.model=y"),
    ("GET", "/v1/stats/questions"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/stats/evaluation-table"): Expect(ADJUDICATOR_UP, query="?by=agent"),
    ("GET", "/v1/stats/evaluation-table.csv"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/stats/dimensions"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/stats/failure-tags"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/stats/attempts"): Expect(ADMIN_ONLY),
    ("GET", "/v1/stats/agreement"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/exports/gradings"): Expect(ADMIN_ONLY, query="?format=csv"),
    ("POST", "/v1/tokens"): Expect(ADMIN_ONLY, body={"name": "x", "role": "submitter"}),
    ("GET", "/v1/tokens"): Expect(ADMIN_ONLY),
    ("POST", "/v1/tokens/{token_id}/revoke"): Expect(roles(403, 403, 404)),
    # an admin without a file: 415 (the upload itself is tested in test_imports_api.py)
    ("POST", "/v1/imports"): Expect(roles(403, 403, 415)),
    ("GET", "/v1/imports/{job_id}"): Expect(roles(403, 403, 404)),
    ("POST", "/v1/regrade-jobs"): Expect(ADMIN_ONLY, body=DRY_RUN),
    ("GET", "/v1/regrade-jobs/{job_id}"): Expect(ADMIN_ONLY),
    ("GET", "/v1/regrade-jobs/{job_id}/flips"): Expect(ADMIN_ONLY),
    ("POST", "/v1/regrade-jobs/{job_id}/pause"): Expect(roles(403, 403, 409)),
    ("POST", "/v1/regrade-jobs/{job_id}/resume"): Expect(roles(403, 403, 409)),
    ("POST", "/v1/regrade-jobs/{job_id}/cancel"): Expect(roles(403, 403, 409)),
    # the fixture's job is graded live: it has no batch requests or results (422 engine)
    ("GET", "/v1/regrade-jobs/{job_id}/batch-requests"): Expect(roles(403, 403, 422)),
    ("POST", "/v1/regrade-jobs/{job_id}/batch-results"): Expect(
        roles(403, 403, 422), headers={"Content-Type": "application/jsonl"}
    ),
    # past the guard, an admin meets the target check (a loopback URL): no test reaches
    # the internet, so none registers a public receiver
    ("POST", "/v1/webhooks"): Expect(
        roles(403, 403, 422),
        body={"url": "http://127.0.0.1:9/hook", "events": ["grading.completed"]},
    ),
    ("GET", "/v1/webhooks"): Expect(ADMIN_ONLY),
    ("POST", "/v1/judges/canary"): Expect(ADMIN_ONLY, body={}),
    ("GET", "/v1/judges/canary"): Expect(ADJUDICATOR_UP),
    ("GET", "/v1/webhooks/{webhook_id}/deliveries"): Expect(roles(403, 403, 404)),
    ("POST", "/v1/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver"): Expect(
        roles(403, 403, 404)
    ),
}


def route_table(app: Litestar) -> list[tuple[str, str]]:
    """Every (method, path) the app serves, in its order; Litestar's OPTIONS answers aside.

    Paths name their parameters without their types: ``/v1/gradings/{grading_id}``.
    """
    return [
        (method, re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path))
        for route in app.routes
        for handler in getattr(route, "route_handlers", ())
        for method in sorted(handler.http_methods)
        if method != "OPTIONS"
    ]


def fill(path: str, values: Mapping[str, str]) -> str:
    """``/v1/gradings/{grading_id}`` -> ``/v1/gradings/<the grading>``."""
    for name, value in values.items():
        path = path.replace(f"{{{name}}}", value)
    assert "{" not in path, f"no value for a path parameter of {path}: add it to the test"
    return path


def test_every_route_has_a_stated_expectation(tmp_path: Any) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path}/x.db", judge="scripted:pass")
    table = route_table(create_app(settings, start_workers=False))
    assert len(table) == len(set(table)), "a (method, path) is served twice"
    unstated = [f"{method} {path}" for method, path in table if (method, path) not in EXPECTED]
    assert not unstated, "routes without an expected answer per role: " + ", ".join(unstated)
    stale = [f"{method} {path}" for method, path in EXPECTED if (method, path) not in table]
    assert not stale, "expectations of routes the app no longer serves: " + ", ".join(stale)


async def _principals(engine: Engine) -> dict[str, dict[str, str]]:
    store = Store(engine, key=session_key())
    headers: dict[str, dict[str, str]] = {"none": {}}
    for name in PRINCIPALS[1:]:
        role = "submitter" if "submitter" in name or name in ("revoked", "expired") else name
        plaintext, record = await store.tokens.create(name=name, role=role)
        headers[name] = {"Authorization": f"Bearer {plaintext}"}
        if name == "revoked":
            await store.tokens.revoke(record.id)
        if name == "expired":
            with engine.begin() as connection:
                connection.execute(
                    update(TokenRecord)
                    .where(TokenRecord.id == record.id)  # type: ignore[arg-type]
                    .values(expires_at=utcnow() - timedelta(minutes=1))
                )
    return headers


def _matches(status: int, expected: Any) -> bool:
    return 200 <= status < 300 if expected == OK else status == expected


async def _fixtures(client: Any, headers: dict[str, dict[str, str]]) -> dict[str, str]:
    """A scenario, a grading of "submitter" and a finished empty regrade job: path values."""
    admin = headers["admin"]
    await client.post("/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=admin)
    created = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": DIAGNOSIS, "scenario_id": "s1"},
        headers=headers["submitter"],
    )
    job = await client.post("/v1/regrade-jobs", json=EMPTY_JOB, headers=admin)
    return {
        "grading_id": created.json()["id"],
        # the grading beside itself: one attempt, two (here the same) gradings
        "first": created.json()["id"],
        "second": created.json()["id"],
        "scenario_id": "s1",
        "rubric_id": "sregym-rca",
        "tag_id": "999999",
        "token_id": "nope",
        "job_id": job.json()["id"],
        "path": "nope",
        "file_path": "favicon.svg",
        "webhook_id": "nope",
        "delivery_id": "nope",
        "action": "pause",
    }


@pytest.mark.parametrize("principal", PRINCIPALS)
async def test_every_route_answers_each_principal_as_expected(
    api_client: Any, engine: Engine, principal: str
) -> None:
    headers = await _principals(engine)
    async with api_client() as client:
        values = await _fixtures(client, headers)
        failures = []
        for method, path in route_table(client.app):
            expect = EXPECTED.get((method, path))
            if expect is None:
                failures.append(f"{method} {path}: no stated expectation")
                continue
            url = fill(path, values) + expect.query
            expected = expect.status(principal)
            response = await client.request(
                method, url, json=expect.body, headers={**headers[principal], **expect.headers}
            )
            if not _matches(response.status_code, expected):
                failures.append(f"{method} {url}: {response.status_code}, expected {expected}")
            problem = response.headers.get("content-type", "").startswith(
                "application/problem+json"
            )
            if response.status_code >= 400 and path.startswith("/v1/") and not problem:
                failures.append(f"{method} {url}: an error that is not problem+json")
            # the scenario's ground truth and judge prompts never reach submitters
            if principal not in ("adjudicator", "admin") and TRUTH in response.text:
                failures.append(f"{method} {url}: leaks the ground truth")
    assert not failures, "\n".join(failures)
