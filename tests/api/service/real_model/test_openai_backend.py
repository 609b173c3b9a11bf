"""The ``openai`` backend against the real model's server: the server's own refusal of an
oversized prompt (a grading through the backend is the end-to-end test's,
``test_service_end_to_end.py``)."""

from __future__ import annotations

from judge.backends.openai import OpenAIBackend
from judge.grader import Grader
from judge.rubric import Rubric
from tests.api.service.real_model.shared import (
    DIAGNOSIS,
    ONCE,
    PARAMS,
    REAL_MODEL_MARKS,
    TRUTH,
)
from tests.support.llama_server import LlamaServer

pytestmark = REAL_MODEL_MARKS


async def test_the_servers_refusal_of_an_oversized_prompt_ends_unscored(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    # no window configured: the prompt is sent and the server itself refuses it (400)
    flood = DIAGNOSIS + " " + "connection refused by peer; " * 1500
    grader = Grader(real_backend, params=PARAMS, retry=ONCE)
    result = await grader.grade(rubric, TRUTH, flood)
    assert result.status == "unscored" and result.unscored_reason == "context_overflow"
    # every request is an attempt on record: the server's refusals of json_schema and
    # logprobs come first, then the one refusal of the prompt, never retried
    outcomes = [a.outcome for a in result.calls[0].attempts]
    assert len(result.calls) == 1 and outcomes[-1] == "context_overflow"
    assert set(outcomes[:-1]) <= {"feature_refused"}
    assert "maximum context length" in (result.calls[0].error or "")
