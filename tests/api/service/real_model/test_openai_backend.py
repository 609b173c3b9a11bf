"""The ``openai`` backend against the real model's server: a grading, and the server's own
refusal of an oversized prompt."""

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
    assert_parsed_or_explicitly_unscored,
)
from tests.support.llama_server import LlamaServer

pytestmark = REAL_MODEL_MARKS


async def test_the_openai_backend_grades_with_the_real_server(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    grader = Grader(real_backend, params=PARAMS, retry=ONCE, context_tokens=llama_server.n_ctx)
    result = await grader.grade(rubric, TRUTH, DIAGNOSIS)
    assert_parsed_or_explicitly_unscored(result, rubric)
    for call in result.calls:
        assert call.error_code is None, call.error
        completion = call.completion
        assert completion is not None and completion.text
        # llama.cpp refuses json_schema with a 500; the backend fell back to json_object
        assert completion.response_format == "json_object"
        # replies are streamed; llama-cpp-python's streams carry no usage (it ignores
        # stream_options.include_usage), so its token counts are unknown, never made up
        assert completion.prompt_tokens is None or completion.prompt_tokens > 200
        assert completion.completion_tokens is None or completion.completion_tokens > 0
        assert call.attempts and call.attempts[-1].outcome == "ok"


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
