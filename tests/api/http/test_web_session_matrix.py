"""Every workbench page answers each signed-in role as documented: the session half of
the role matrix (``test_role_matrix.py`` walks the routes with bearer tokens and
without a session).

The expected cell comes from docs/adjudication.md (Workbench; Reports, regrades and
judges): submitters reach ``/``, their own gradings' list and pages, and signing out;
everything else is for adjudicators and admins, and a regrade job's buttons for admins.
A page of a grading a principal may not read is a 404, as the API's is. "passes" means
the guard let the request through (any answer but 401/403/404 or a redirect to sign in:
an empty form may well be a 422 past the guard). A page added without a line in
``EXPECTED`` fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from storage import Store
from tests.api.http.test_role_matrix import DIAGNOSIS, TRUTH, fill, route_table
from tests.support.keys import session_key
from tests.web.conftest import csrf_of

PASSES = "passes"
SUBMITTER_UP = {
    "submitter": PASSES,
    "other": PASSES,
    "inline": PASSES,
    "adjudicator": PASSES,
    "admin": PASSES,
}
ADJUDICATOR_UP = {
    "submitter": 403,
    "other": 403,
    "inline": 403,
    "adjudicator": PASSES,
    "admin": PASSES,
}
ADMIN_ONLY = {"submitter": 403, "other": 403, "inline": 403, "adjudicator": 403, "admin": PASSES}
OWNER_OR_ADJUDICATOR = {**SUBMITTER_UP, "other": 404, "inline": 404}

#: principal -> (role, granted its own ground truth)
PRINCIPALS = {
    "submitter": ("submitter", False),
    "other": ("submitter", False),
    "inline": ("submitter", True),
    "adjudicator": ("adjudicator", False),
    "admin": ("admin", False),
}

EXPECTED: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/"): SUBMITTER_UP,
    ("POST", "/logout"): SUBMITTER_UP,
    ("GET", "/gradings"): SUBMITTER_UP,
    ("GET", "/gradings/{grading_id}"): OWNER_OR_ADJUDICATOR,
    ("GET", "/queue"): ADJUDICATOR_UP,
    ("GET", "/queue/next"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/done"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/skip"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/assign"): ADJUDICATOR_UP,
    ("GET", "/gradings/{first}/versus/{second}"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/overrides"): ADJUDICATOR_UP,
    ("GET", "/gradings/{grading_id}/label"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/label"): ADJUDICATOR_UP,
    ("GET", "/gradings/{grading_id}/label/saved"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/tags"): ADJUDICATOR_UP,
    ("POST", "/gradings/{grading_id}/tags/{tag_id}/remove"): ADJUDICATOR_UP,
    ("GET", "/reports"): ADJUDICATOR_UP,
    ("GET", "/reports/compare"): ADJUDICATOR_UP,
    ("GET", "/reports/agreement"): ADJUDICATOR_UP,
    ("GET", "/reports/table"): ADJUDICATOR_UP,
    ("GET", "/reports/table.csv"): ADJUDICATOR_UP,
    ("GET", "/regrades"): ADJUDICATOR_UP,
    ("GET", "/regrades/{job_id}"): ADJUDICATOR_UP,
    ("GET", "/regrades/{job_id}/progress"): ADJUDICATOR_UP,
    ("GET", "/regrades/{job_id}/flips.csv"): ADJUDICATOR_UP,
    ("POST", "/regrades/{job_id}/{action}"): ADMIN_ONLY,
    ("GET", "/judges"): ADJUDICATOR_UP,
}

#: routes that take no session (sign-in, the API, static files, probes, the schema)
_SESSIONLESS = ("/v1/", "/schema", "/static/", "/login", "/healthz", "/readyz", "/metrics")


def _web_routes(app: Any) -> list[tuple[str, str]]:
    table = [
        (method, path)
        for method, path in route_table(app)
        if not path.startswith(_SESSIONLESS) and path != "/login"
    ]
    # signing out ends the session the rest of the sweep uses: last
    return [r for r in table if r != ("POST", "/logout")] + [("POST", "/logout")]


def _verdict(response: Any, path: str) -> Any:
    location = response.headers.get("location", "")
    signed_out = path == "/logout" and response.status_code == 303
    if response.status_code in (302, 303) and location.startswith("/login") and not signed_out:
        return 401
    if response.status_code in (401, 403, 404):
        return response.status_code
    return PASSES


@pytest.mark.parametrize("principal", list(PRINCIPALS))
async def test_every_page_answers_each_signed_in_role_as_documented(
    api_client: Any, engine: Engine, principal: str
) -> None:
    store = Store(engine, key=session_key())
    plain: dict[str, str] = {}
    for name, (role, inline) in PRINCIPALS.items():
        plain[name], _ = await store.tokens.create(name=name, role=role, inline_ground_truth=inline)
    bearer = {name: {"Authorization": f"Bearer {t}"} for name, t in plain.items()}
    async with api_client(inline_ground_truth="per_token") as client:
        await client.post(
            "/v1/scenarios", json={"id": "s1", "ground_truth": TRUTH}, headers=bearer["admin"]
        )
        grading = await client.post(
            "/v1/submissions?wait=10",
            json={"diagnosis": DIAGNOSIS, "scenario_id": "s1"},
            headers=bearer["submitter"],
        )
        grading_id = grading.json()["id"]
        job = await client.post(
            "/v1/regrade-jobs",
            json={"judge": "scripted:fail", "mode": "shadow"},
            headers=bearer["admin"],
        )
        tag = await client.post(
            f"/v1/gradings/{grading_id}/tags",
            json={"tag": "misread-unit"},
            headers=bearer["adjudicator"],
        )
        values = {
            "grading_id": grading_id,
            "first": grading_id,
            "second": grading_id,
            "job_id": job.json()["id"],
            "tag_id": str(tag.json()["id"]),
            "action": "pause",
        }
        client.cookies.clear()
        form = await client.get("/login")
        signed = await client.post(
            "/login",
            data={"token": plain[principal], "_csrf": csrf_of(form.text), "next": "/"},
            follow_redirects=False,
        )
        assert signed.status_code == 303, signed.text
        csrf = csrf_of((await client.get("/gradings")).text)
        headers = {"X-CSRF-Token": csrf, "Sec-Fetch-Site": "same-origin"}
        failures = []
        routes = _web_routes(client.app)
        unstated = [f"{m} {p}" for m, p in routes if (m, p) not in EXPECTED]
        assert not unstated, "pages without a stated expectation: " + ", ".join(unstated)
        for method, path in routes:
            url = fill(path, values)
            response = await client.request(method, url, headers=headers, follow_redirects=False)
            expected = EXPECTED[(method, path)][principal]
            got = _verdict(response, path)
            if got != expected:
                failures.append(
                    f"{method} {url}: {response.status_code} ({got}), expected {expected}"
                )
    assert not failures, "\n".join(failures)
