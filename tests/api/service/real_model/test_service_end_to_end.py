"""The service grades end to end with the real model: HTTP in, judge calls on record.

This is also the real model's test of the ``openai`` backend grading: each call on
record succeeded on its last attempt, fell back from json_schema (which llama.cpp
refuses) to json_object, and states token counts only where the server gave them.
"""

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
from tests.storage.helpers import sregym_rubric
from tests.support.llama_server import LlamaServer

pytestmark = REAL_MODEL_MARKS

QUESTIONS = [q.id for q in sregym_rubric().questions]


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
        admin = await tokens("admin")  # the whole grading object, review reasons included
        grading = (await client.get(response.headers["location"], headers=admin)).json()
    assert grading["status"] in {"graded", "unscored"}
    assert grading["judge"] == {"backend": "openai", "model": llama_server.model}
    if grading["status"] == "graded":
        assert [a["question_id"] for a in grading["answers"]] == QUESTIONS
        assert grading["passed"] in {True, False} and grading["unscored_reason"] is None
    else:
        assert grading["unscored_reason"] in EXPLICIT_REASONS
        assert grading["answers"] == [] and "unscored" in grading["review_reasons"]
    with engine.connect() as connection:
        calls = (
            connection.execute(
                select(JudgeCallRecord).where(JudgeCallRecord.grading_id == grading["id"])
            )
        ).all()
    assert calls
    for call in calls:
        assert call.error_code is None, call.error
        assert call.attempts and call.attempts[-1]["outcome"] == "ok"
        # llama.cpp refuses json_schema with a 500; the backend fell back to json_object
        assert call.response_format == "json_object" and call.response_text
        # streamed replies: llama-cpp-python reports no usage, so counts may be unknown
        assert call.prompt_tokens is None or call.prompt_tokens > 200
        assert call.completion_tokens is None or call.completion_tokens > 0
