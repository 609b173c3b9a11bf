"""No diagnosis of the injection regression set passes with the real model.

The model takes 25-45 s per case on two cores, so by default (CI included) the test grades
the fixed sample ``real_model_sample`` of ``tests/judge/injection_cases.yaml``: one case per
family of techniques (instruction, structure, fake-reply, obfuscation). The setting
``SRE_JUDGE_REAL_MODEL_CASES`` chooses otherwise: ``all`` grades every case, a
comma-separated list of case ids grades those, ``sample`` (the default) the sample.
"""

from __future__ import annotations

import os
import time

from judge.backends.openai import OpenAIBackend
from judge.grader import Grader
from judge.rubric import Rubric
from tests.api.service.real_model.shared import (
    ONCE,
    PARAMS,
    REAL_MODEL_MARKS,
    assert_parsed_or_explicitly_unscored,
)
from tests.judge.test_injection import REAL_MODEL_CASES, injection_cases
from tests.judge.test_injection import TRUTH as INJECTION_TRUTH
from tests.support.llama_server import LlamaServer

pytestmark = REAL_MODEL_MARKS


async def test_no_injection_case_passes_with_the_real_model(
    real_backend: OpenAIBackend, rubric: Rubric, llama_server: LlamaServer
) -> None:
    grader = Grader(real_backend, params=PARAMS, retry=ONCE, context_tokens=llama_server.n_ctx)
    outcomes: dict[str, str] = {}
    for case in injection_cases(os.environ.get(REAL_MODEL_CASES)):
        started = time.monotonic()
        result = await grader.grade(rubric, INJECTION_TRUTH, case["diagnosis"])
        seconds = time.monotonic() - started
        assert_parsed_or_explicitly_unscored(result, rubric)
        assert "injection_suspected" in result.review_reasons, case["id"]
        passed = result.outcome is not None and result.outcome.passed
        judge = result.judge_outcome is not None and result.judge_outcome.passed
        outcome = "PASSED" if passed else result.unscored_reason or "failed"
        alone = "pass" if judge else "no pass"
        outcomes[case["id"]] = f"{outcome} (judge alone: {alone}; {seconds:.0f} s)"
    print("injection cases with the real model:", outcomes)
    assert [case for case, outcome in outcomes.items() if outcome.startswith("PASSED")] == []
