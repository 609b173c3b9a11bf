"""A real model: SmolLM2-135M behind llama-cpp-python's OpenAI-compatible server.

The 135M model judges poorly; these tests check what must hold whatever it answers:
its replies are parsed or the grading is unscored with an explicit reason, every judge
call is recorded with the server's own token counts, the service works end to end, and
no diagnosis of the injection regression set passes.

Skipped when llama-cpp-python or the model is not installed (``scripts/real-model.sh``);
with ``CI=true`` the fixture fails instead, so CI cannot silently lose these tests.

Injection cases: the model takes 25-45 s per case on two cores, so by default (CI
included) the injection test grades the fixed sample ``real_model_sample`` of
``tests/judge/injection_cases.yaml``: one case per family of techniques (instruction,
structure, fake-reply, obfuscation). The setting ``SRE_JUDGE_REAL_MODEL_CASES`` chooses
otherwise: ``all`` grades every case, a comma-separated list of case ids grades those,
``sample`` (the default) the sample.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any, get_args

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from judge.backends.openai import OpenAIBackend
from judge.backends.streaming import StreamLimits
from judge.calls import SamplingParams
from judge.grader import Grader
from judge.retry import RetryPolicy
from judge.rubric import Rubric, load_rubric_dir
from judge.verdict import GradingResult, UnscoredReason
from storage import JudgeCallRecord
from tests.judge.test_injection import REAL_MODEL_CASES, injection_cases
from tests.judge.test_injection import TRUTH as INJECTION_TRUTH
from tests.support.llama_server import LlamaServer, missing_requirements, running_llama_server

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

TRUTH = (
    "[fault_spec] component=deployment/user-service; namespace=hotel-reservation || "
    "The USER_PORT env var of user-service is set to 9999 while its Service targets 8086."
)
DIAGNOSIS = (
    "user-service in hotel-reservation listens on 9999 (USER_PORT) while its Service "
    "targets 8086, so the frontend's calls to it are refused."
)
#: the reasons a grading may be unscored for: never a silent fail or pass
EXPLICIT_REASONS = set(get_args(UnscoredReason))
#: a reply long enough for nine short answers; keeps each call to seconds on 2 cores
PARAMS = SamplingParams(max_tokens=1024)
ONCE = RetryPolicy(max_attempts=2, initial_wait=0.5, max_wait=1)


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The real model's server, started once for the tests that ask for it."""
    reason = missing_requirements()
    if reason is not None:
        if _ci():
            pytest.fail(f"CI=true but the real model cannot run: {reason}", pytrace=False)
        pytest.skip(reason)
    started = time.monotonic()
    with running_llama_server(tmp_path_factory.mktemp("llama")) as server:
        print(f"llama_cpp.server ready in {time.monotonic() - started:.1f}s")
        yield server


@pytest.fixture
async def real_backend(llama_server: LlamaServer) -> AsyncIterator[OpenAIBackend]:
    limits = StreamLimits(first_token=300, idle=60, total=600)
    backend = OpenAIBackend(llama_server.model, base_url=llama_server.base_url, limits=limits)
    yield backend
    await backend.aclose()


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def _assert_parsed_or_explicitly_unscored(result: GradingResult, rubric: Rubric) -> None:
    assert result.status in {"graded", "unscored"}
    assert result.calls, "at least one judge call is recorded"
    if result.status == "graded":
        assert [a.question_id for a in result.answers] == [q.id for q in rubric.questions]
        assert result.outcome is not None and result.unscored_reason is None
    else:
        assert result.unscored_reason in EXPLICIT_REASONS
        assert result.outcome is None and result.answers == ()
        assert "unscored" in result.review_reasons


async def test_the_openai_backend_grades_with_the_real_server(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    grader = Grader(real_backend, params=PARAMS, retry=ONCE, context_tokens=llama_server.n_ctx)
    result = await grader.grade(rubric, TRUTH, DIAGNOSIS)
    _assert_parsed_or_explicitly_unscored(result, rubric)
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


async def test_a_compact_positively_asked_grading_with_the_real_server(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    """Issue 18: the compact format and positive wording reach a real model and come back
    parsed in the rubric's polarity, or explicitly unscored."""
    grader = Grader(
        real_backend,
        params=PARAMS,
        retry=ONCE,
        context_tokens=llama_server.n_ctx,
        reply_format="compact",
        ask_as="positive",
    )
    result = await grader.grade(rubric, TRUTH, DIAGNOSIS)
    _assert_parsed_or_explicitly_unscored(result, rubric)
    positive = next(q.positive_text for q in rubric.questions if q.positive_text)
    assert positive in result.calls[0].request.messages[1].content
    for answer in result.answers:
        positive = rubric.question(answer.question_id).ask_as == "positive" or bool(
            rubric.question(answer.question_id).positive_text
        )
        assert answer.reasoning.startswith("[asked: ") is positive


async def test_the_service_grades_end_to_end_with_the_real_model(
    api_client: Any, tokens: Any, engine: AsyncEngine, llama_server: LlamaServer, db_backend: str
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
    async with engine.connect() as connection:
        calls = (
            await connection.execute(
                select(JudgeCallRecord).where(JudgeCallRecord.grading_id == grading["id"])
            )
        ).all()
    assert calls
    for call in calls:
        assert call.response_format == "json_object" and call.response_text
        # streamed replies: llama-cpp-python reports no usage, so counts may be unknown
        assert call.prompt_tokens is None or call.prompt_tokens > 200
        assert call.completion_tokens is None or call.completion_tokens > 0


async def test_no_injection_case_passes_with_the_real_model(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    grader = Grader(real_backend, params=PARAMS, retry=ONCE, context_tokens=llama_server.n_ctx)
    outcomes: dict[str, str] = {}
    for case in injection_cases(os.environ.get(REAL_MODEL_CASES)):
        started = time.monotonic()
        result = await grader.grade(rubric, INJECTION_TRUTH, case["diagnosis"])
        seconds = time.monotonic() - started
        _assert_parsed_or_explicitly_unscored(result, rubric)
        assert "injection_suspected" in result.review_reasons, case["id"]
        passed = result.outcome is not None and result.outcome.passed
        judge = result.judge_outcome is not None and result.judge_outcome.passed
        outcome = "PASSED" if passed else result.unscored_reason or "failed"
        alone = "pass" if judge else "no pass"
        outcomes[case["id"]] = f"{outcome} (judge alone: {alone}; {seconds:.0f} s)"
    print("injection cases with the real model:", outcomes)
    assert [case for case, outcome in outcomes.items() if outcome.startswith("PASSED")] == []


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
