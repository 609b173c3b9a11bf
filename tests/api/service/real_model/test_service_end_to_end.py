"""The service grades end to end with the real model: HTTP in, judge calls on record."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from storage import JudgeCallRecord
from tests.api.service.real_model.shared import (
    DIAGNOSIS,
    EXPLICIT_REASONS,
    PARAMS,
    REAL_MODEL_MARKS,
    TRUTH,
)
from tests.support.llama_server import LlamaServer

pytestmark = REAL_MODEL_MARKS


async def test_the_service_grades_end_to_end_with_the_real_model(
    api_client: Any, tokens: Any, engine: Engine, llama_server: LlamaServer, db_backend: str
) -> None:
    if db_backend != "sqlite":
        pytest.skip("one database is enough to drive the real model end to end")
    headers = await tokens("submitter")
    spec = f"openai:{llama_server.model}@{llama_server.base_url}"
    async with api_client(
        judge=spec,
        backends={},
        judge_max_tokens=PARAMS.max_tokens,
        judge_max_attempts=2,
        judge_timeout=300,
        judge_context_tokens=llama_server.n_ctx,
    ) as client:
        response = await client.post(
            "/v1/submissions?wait=300",
            json={"diagnosis": DIAGNOSIS, "ground_truth": TRUTH, "agent": "a1"},
            headers=headers,
        )
        assert response.status_code == 201, response.text
        grading = (await client.get(response.headers["location"], headers=headers)).json()
    assert grading["status"] in {"graded", "unscored"}
    assert grading["judge"] == {"backend": "openai", "model": llama_server.model}
    if grading["status"] == "graded":
        assert len(grading["answers"]) == 9 and grading["passed"] in {True, False}
    else:
        assert grading["unscored_reason"] in EXPLICIT_REASONS
    with engine.connect() as connection:
        calls = (
            connection.execute(
                select(JudgeCallRecord).where(JudgeCallRecord.grading_id == grading["id"])
            )
        ).all()
    assert calls
    for call in calls:
        assert call.response_format == "json_object" and call.response_text
        # streamed replies: llama-cpp-python reports no usage, so counts may be unknown
        assert call.prompt_tokens is None or call.prompt_tokens > 200
        assert call.completion_tokens is None or call.completion_tokens > 0
