"""The self-preference guard: a judge of the agent's own model family warns or refuses."""

from __future__ import annotations

from typing import Any

from judge.backends.scripted import ScriptedBackend

JUDGE = "openai:qwen2.5-1.5b-instruct"
TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"


def _body(model: str) -> dict[str, Any]:
    return {"diagnosis": "user-service sets USER_PORT=9999", "ground_truth": TRUTH, "model": model}


async def test_same_family_gradings_carry_a_warning(api_client: Any, tokens: Any) -> None:
    backends = {JUDGE: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=JUDGE, backends=backends) as client:
        headers = await tokens("submitter")
        own = await client.post("/v1/submissions?wait=10", json=_body("Qwen3-8B"), headers=headers)
        assert own.status_code == 201, own.text
        assert "self_preference" in own.json()["review_reasons"]
        assert own.json()["needs_review"] is True
        other = await client.post("/v1/submissions?wait=10", json=_body("gpt-4o"), headers=headers)
        assert other.status_code == 201
        assert "self_preference" not in other.json()["review_reasons"]


async def test_refuse_answers_422_naming_the_model(api_client: Any, tokens: Any) -> None:
    backends = {JUDGE: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=JUDGE, backends=backends, self_preference="refuse") as client:
        headers = await tokens("submitter")
        refused = await client.post("/v1/submissions", json=_body("qwen3:8b"), headers=headers)
        assert refused.status_code == 422
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert "model" in refused.text and "qwen family" in refused.text
        listed = await client.get("/v1/gradings", headers=headers)
        assert listed.json()["items"] == []
        accepted = await client.post("/v1/submissions", json=_body("llama3.1"), headers=headers)
        assert accepted.status_code == 202
