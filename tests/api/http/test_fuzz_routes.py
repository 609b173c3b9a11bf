"""No 5xx from any input: schemathesis drives every operation of the app's OpenAPI
document in process, on each database under test, and every answer it documents matches
its schema.

The inner loop sends one case of each kind per operation as an admin; the slow run
(``-m slow``, CI) adds schemathesis' coverage phase (boundary and invalid values of
every parameter), more Hypothesis examples, stateful chains that reuse the ids answers
return, and the operations a submitter may call under a submitter token. The judge is
the scripted one, and the OpenAI and Ollama clients point at a closed loopback port in
case a request names another judge, so nothing leaves the machine.
``SRE_JUDGE_FUZZ_SEED`` changes the seed (CI keeps the fixed one, so runs repeat) and
``SRE_JUDGE_FUZZ_EXAMPLES`` the most examples per operation of the slow run (default 8).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from litestar import Litestar, Response, get
from litestar.openapi import OpenAPIConfig
from litestar.params import FromQuery
from schemathesis.python.asgi import get_client

from api.http.app import create_app
from api.service.settings import Settings
from judge.backends.scripted import ScriptedBackend
from tests.support.fuzz import (
    DEFAULT_SEED,
    FuzzFigures,
    all_operations,
    run_fuzz,
    stop_fuzzed_apps,
    submitter_operations,
)
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

SEED = int(os.environ.get("SRE_JUDGE_FUZZ_SEED", DEFAULT_SEED))
#: most Hypothesis examples per operation in the slow run; raise it for a deeper hunt
SLOW_EXAMPLES = int(os.environ.get("SRE_JUDGE_FUZZ_EXAMPLES", 8))
#: nowhere: a judge spec without a base URL would otherwise reach the clients' defaults
CLOSED_PORT = "http://127.0.0.1:9"


@pytest.fixture
def fuzzed_app(
    database_url: str, engine: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Litestar]:
    """The app on this test's (migrated) database, with its own engine in schemathesis'
    event loop; its lifespan is ended when the test ends."""
    del engine  # requested so that database_url is migrated
    monkeypatch.setenv("OPENAI_BASE_URL", f"{CLOSED_PORT}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("OLLAMA_HOST", CLOSED_PORT)
    settings = Settings(
        database_url=database_url,
        judge="scripted:pass",
        judge_max_attempts=1,
        judge_timeout=5,
        provisional_review_rate=0.0,
    )
    app = create_app(settings, backends={"scripted:pass": ScriptedBackend.for_mode("pass")})
    try:
        yield app
    finally:
        stop_fuzzed_apps()


def _seed_data(app: Litestar, admin: str, submitter: str) -> None:
    """A scenario and a grading from each token (inline and registered ground truth), so
    that lists, stats and exports have rows to read."""
    with get_client(app) as client:

        def post(path: str, token: str, body: dict[str, Any]) -> None:
            answer = client.post(
                f"http://testserver{path}", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            assert answer.status_code < 300, answer.text

        post("/v1/scenarios", admin, {"id": "hotel/user-port", "ground_truth": TRUTH})
        post("/v1/submissions?wait=10", submitter, {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH})
        post(
            "/v1/submissions?wait=10",
            admin,
            {"diagnosis": DIAGNOSIS, "scenario_id": "hotel/user-port", "agent": "a", "model": "m"},
        )


async def _bearer(tokens: Any, role: str) -> str:
    headers = await tokens(role, f"fuzz-{role}")
    return str(headers["Authorization"]).removeprefix("Bearer ")


def _assert_clean(figures: FuzzFigures, expected_operations: int) -> None:
    print(figures.summary())  # the figures the closing note quotes (pytest -s, or -rA)
    assert not figures.server_errors, "\n".join(figures.server_errors[:20])
    assert not figures.failures, "\n".join(figures.failures[:20])
    assert len(figures.operations) >= expected_operations, figures.operations


async def test_every_route_answers_generated_requests_without_a_5xx(
    fuzzed_app: Litestar, tokens: Any
) -> None:
    admin, submitter = await _bearer(tokens, "admin"), await _bearer(tokens, "submitter")
    _seed_data(fuzzed_app, admin, submitter)
    figures = run_fuzz(fuzzed_app, admin, max_examples=1, phases={"fuzzing"}, seed=SEED)
    _assert_clean(figures, len(all_operations(fuzzed_app)))


@pytest.mark.slow
async def test_every_route_survives_coverage_fuzzing_and_stateful_runs(
    fuzzed_app: Litestar, tokens: Any
) -> None:
    admin, submitter = await _bearer(tokens, "admin"), await _bearer(tokens, "submitter")
    _seed_data(fuzzed_app, admin, submitter)
    phases = {"examples", "coverage", "fuzzing", "stateful"}
    as_admin = run_fuzz(fuzzed_app, admin, max_examples=SLOW_EXAMPLES, phases=phases, seed=SEED)
    _assert_clean(as_admin, len(all_operations(fuzzed_app)))
    visible = submitter_operations(fuzzed_app)
    as_submitter = run_fuzz(
        fuzzed_app,
        submitter,
        max_examples=SLOW_EXAMPLES,
        phases={"fuzzing"},
        operation_ids=visible,
        seed=SEED,
    )
    _assert_clean(as_submitter, len(visible))


def test_the_run_reports_a_5xx_and_spares_a_promised_503() -> None:
    """The property can fail: a route answering 500 is reported with a curl line, a
    not-ready /readyz is not."""

    @get("/v1/broken", operation_id="broken")
    async def broken(q: FromQuery[int] = 0) -> dict[str, int]:
        raise RuntimeError(f"boom {q}")

    @get("/readyz", operation_id="readyz")
    async def not_ready() -> Response[dict[str, str]]:
        return Response({"status": "starting"}, status_code=503)

    app = Litestar([broken, not_ready], openapi_config=OpenAPIConfig("t", "1", path="/schema"))
    try:
        figures = run_fuzz(app, "token", max_examples=1, phases={"fuzzing"})
    finally:
        stop_fuzzed_apps()
    assert figures.allowed_5xx >= 1
    assert figures.server_errors and all(
        e.startswith("500 GET /v1/broken") for e in figures.server_errors
    )
    assert "curl" in figures.server_errors[0]
