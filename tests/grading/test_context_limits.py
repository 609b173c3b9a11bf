"""In the service, a prompt over the judge's context window ends unscored, never pending;
a window the judge does not tell is no reason not to grade."""

from __future__ import annotations

from typing import Any

import httpx
import respx

from judge.backends.openai import OpenAIBackend
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.errors import ContextOverflow
from tests.judge.backend_servers import OPENAI_BASE, OPENAI_MODEL, openai_completion_reply
from tests.support.judge_server import sregym_reply
from tests.support.submissions import IDS

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
SHORT = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
LONG = SHORT + "\n" + "\n".join(f"log line {i}: connection refused by peer" for i in range(400))


async def _submit(client: Any, headers: dict[str, str], diagnosis: str) -> dict[str, Any]:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": diagnosis, "ground_truth": TRUTH},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    grading: dict[str, Any] = response.json()
    return grading


async def test_the_configured_window_is_enforced(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    judge = ScriptedBackend([scripted_reply])
    spec = "openai:small@http://127.0.0.1:9/v1"
    # the ground truth counts as SRE_JUDGE_GROUND_TRUTH_BUDGET_CHARS (2000) characters
    async with api_client(judge=spec, backends={spec: judge}, judge_context_tokens=3700) as client:
        grading = await _submit(client, headers, LONG)
        assert grading["status"] == "unscored"
        assert grading["unscored_reason"] == "context_overflow"
        assert "context window of 3700" in grading["detail"]
        assert judge.requests == []
        fitting = await _submit(client, headers, SHORT)
        assert fitting["status"] == "graded"


async def test_truncate_setting_cuts_and_records_the_cut(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    judge = ScriptedBackend([scripted_reply])
    spec = "openai:small@http://127.0.0.1:9/v1"
    async with api_client(
        judge=spec,
        backends={spec: judge},
        judge_context_tokens=3400,
        context_overflow="truncate",
    ) as client:
        grading = await _submit(client, headers, LONG)
    assert grading["status"] == "graded"
    assert f"diagnosis cut from {len(LONG)} to" in grading["detail"]
    assert grading["submission"]["diagnosis"] == LONG  # the stored diagnosis stays whole


async def test_a_server_refusal_is_unscored_not_retried_later(api_client: Any, tokens: Any) -> None:
    headers = await tokens("submitter")
    refusing = ScriptedBackend(
        [ContextOverflow("the request exceeds the available context size", status_code=400)]
    )
    spec = "openai:small@http://127.0.0.1:9/v1"
    async with api_client(judge=spec, backends={spec: refusing}) as client:
        grading = await _submit(client, headers, SHORT)
    assert grading["status"] == "unscored"
    assert grading["unscored_reason"] == "context_overflow"
    assert grading["pending_reason"] is None
    assert len(refusing.requests) == 1


async def test_a_gateway_answering_its_model_listing_with_a_page_still_grades(
    api_client: Any, tokens: Any
) -> None:
    """``GET /models`` answered with a 200 HTML page (an SPA fallback, a landing page)
    while chat completions work: the window is unknown, and the grading goes on."""
    headers = await tokens("submitter")
    spec = f"openai:{OPENAI_MODEL}@{OPENAI_BASE}"
    reply = openai_completion_reply(sregym_reply(set(IDS), evidence="USER_PORT=9999"))
    page = httpx.Response(200, text="<html><body>gateway</body></html>")
    with respx.mock(base_url=OPENAI_BASE, assert_all_called=False) as router:
        models = router.get("/models").mock(return_value=page)
        router.post("/chat/completions").mock(return_value=reply)
        backend = OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="sk-test")
        async with api_client(judge=spec, backends={spec: backend}) as client:
            grading = await _submit(client, headers, SHORT)
    assert grading["status"] == "graded", grading.get("pending_reason")
    assert models.called
