"""The grading domain: rubrics, prompts, judge backends, reply parsing, evidence, rule.

No web and no database here: ``api`` and ``storage`` build on these names.
"""

from __future__ import annotations

from judge.calls import Attempt, ChatMessage, Completion, JudgeCall, JudgeRequest, SamplingParams
from judge.errors import (
    ContextOverflow,
    InputError,
    JudgeAuthError,
    JudgeCallError,
    JudgeError,
    JudgeRateLimited,
    JudgeRejected,
    JudgeSpecError,
    JudgeTimeout,
    JudgeUnavailable,
    RubricError,
)
from judge.grader import Grader
from judge.inputs import DEFAULT_MAX_TEXT_BYTES, check_text
from judge.panel import PanelGrader, PanelMember
from judge.retry import RetryPolicy
from judge.rubric import (
    DEFAULT_RUBRIC_DIR,
    Dimension,
    PassRule,
    Question,
    Rubric,
    load_rubric,
    load_rubric_dir,
    rubric_from_mapping,
)
from judge.rule import DimensionScore, RuleOutcome, apply_rule
from judge.spec import JudgeSpec, parse_judge_spec
from judge.verdict import Answer, GradingResult, Vote

__all__ = [
    "DEFAULT_MAX_TEXT_BYTES",
    "DEFAULT_RUBRIC_DIR",
    "Answer",
    "Attempt",
    "ChatMessage",
    "Completion",
    "ContextOverflow",
    "Dimension",
    "DimensionScore",
    "Grader",
    "GradingResult",
    "InputError",
    "JudgeAuthError",
    "JudgeCall",
    "JudgeCallError",
    "JudgeError",
    "JudgeRateLimited",
    "JudgeRejected",
    "JudgeRequest",
    "JudgeSpec",
    "JudgeSpecError",
    "JudgeTimeout",
    "JudgeUnavailable",
    "PanelGrader",
    "PanelMember",
    "PassRule",
    "Question",
    "RetryPolicy",
    "Rubric",
    "RubricError",
    "RuleOutcome",
    "SamplingParams",
    "Vote",
    "apply_rule",
    "check_text",
    "load_rubric",
    "load_rubric_dir",
    "parse_judge_spec",
    "rubric_from_mapping",
]
