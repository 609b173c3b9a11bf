"""A judge that is down or refuses its key: gradings wait, pending, and readiness says why."""

from __future__ import annotations

from typing import Any

from judge.backends.scripted import ScriptedBackend
from judge.errors import JudgeAuthError, JudgeUnavailable
from tests.support.judge_server import sregym_reply
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH, first_set


async def test_a_judge_outage_keeps_submissions_pending_and_readyz_says_why(
    api_client: Any, tokens: Any
) -> None:
    headers = await tokens("submitter")
    down = ScriptedBackend(
        [JudgeUnavailable("connection refused") for _ in range(50)], model="down"
    )
    spec = "openai:down@http://127.0.0.1:9/v1"
    async with api_client(judge=spec, backends={spec: down}, judge_max_attempts=1) as client:
        response = await client.post(
            "/v1/submissions?wait=0.2",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH},
            headers=headers,
        )
        assert response.status_code == 202  # still pending once the wait is over
        grading = await first_set(client, response.headers["location"], headers, "pending_reason")
        assert grading["status"] == "pending"
        assert grading["pending_reason"].startswith("judge_unavailable")
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["judge"]["ok"] is False
        assert ready.json()["database"]["ok"] is True
        assert ready.json()["queue"]["pending"] == 1


async def test_a_refused_judge_key_keeps_gradings_pending_until_it_is_fixed(
    api_client: Any, tokens: Any
) -> None:
    headers, admin = await tokens("submitter"), await tokens("admin")
    refusing = [JudgeAuthError("openai answered 401: invalid api key", status_code=401)] * 2
    judge = ScriptedBackend([*refusing, sregym_reply(set(IDS), evidence="USER_PORT=9999")])
    spec = "openai:rotated@http://127.0.0.1:9/v1"
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 0.2}
    async with api_client(judge=spec, backends={spec: judge}, **settings) as client:
        response = await client.post(
            "/v1/submissions", json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}, headers=headers
        )
        waiting = await first_set(client, response.headers["location"], headers, "pending_reason")
        ready = (await client.get("/readyz")).json()
        as_admin = (await client.get("/readyz", headers=admin)).json()
        graded = await first_set(client, response.headers["location"], headers, "passed")
    assert waiting["status"] == "pending" and waiting["unscored_reason"] is None
    # a code and the kind of failure; what the judge answered stays with the judge call
    refused = "judge_auth_failed: judge refused the service's key (HTTP 401)"
    assert waiting["pending_reason"] == refused
    assert ready["judge"] == {
        "ok": False,
        "judge": "openai:rotated",
        "reason": "judge_auth_failed",
        "setting": "SRE_JUDGE_JUDGE",
    }
    assert as_admin["judge"]["address"] == "http://127.0.0.1:9/v1"
    assert graded["status"] == "graded" and graded["passed"] is True  # no regrade needed
