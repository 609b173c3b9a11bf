"""What the real-model tests share: the case they grade and what must hold whatever it answers.

The 135M model judges poorly; these tests check what must hold whatever it answers: its
replies are parsed or the grading is unscored with an explicit reason, every judge call is
recorded with the server's own token counts, the service works end to end, and no
diagnosis of the injection regression set passes.
"""

from __future__ import annotations

from typing import get_args

import pytest

from judge.calls import SamplingParams
from judge.retry import RetryPolicy
from judge.rubric import Rubric
from judge.verdict import GradingResult, UnscoredReason

#: every real-model test starts a real server and waits on a real model
REAL_MODEL_MARKS = [pytest.mark.real_model, pytest.mark.slow]

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


def assert_parsed_or_explicitly_unscored(result: GradingResult, rubric: Rubric) -> None:
    """The model's reply was parsed into every question's answer, or the grading is
    unscored with an explicit reason and flagged for review."""
    assert result.status in {"graded", "unscored"}
    assert result.calls, "at least one judge call is recorded"
    if result.status == "graded":
        assert [a.question_id for a in result.answers] == [q.id for q in rubric.questions]
        assert result.outcome is not None and result.unscored_reason is None
    else:
        assert result.unscored_reason in EXPLICIT_REASONS
        assert result.outcome is None and result.answers == ()
        assert "unscored" in result.review_reasons
