"""Answers and grading results, graded or explicitly unscored."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from judge.calls import JudgeCall, ServerText
from judge.evidence import QuoteCheck
from judge.review_reasons import holds_pass
from judge.rule import RuleOutcome

__all__ = ["Answer", "GradingResult", "UnscoredReason", "Veto", "VetoCheck", "Vote"]

UnscoredReason = Literal[
    "unparseable_reply",
    "judge_unavailable",
    "judge_rate_limited",
    "judge_timeout",
    "judge_rejected",
    "judge_auth",
    "judge_error",
    "context_overflow",
    "reply_truncated",
]


#: the check in code that overruled or questioned a judge's yes: a grounding condition
#: of the question (``judge.grounding``), or its quote (``judge.evidence``: ``evidence.``
#: and the quote check's outcome)
VetoCheck = Literal[
    "grounding.component",
    "grounding.origin_consistent",
    "grounding.values",
    "grounding.consistent_values",
    "evidence.empty",
    "evidence.too_short",
    "evidence.not_found",
    "evidence.injected",
]


class Veto(BaseModel):
    """Why code did not take a judge's yes as it stands: which check, what it did, and in
    words what it looked for and did not find. The words may name the ground truth's
    component and values: whoever may not see the ground truth may not see them."""

    model_config = ConfigDict(frozen=True)

    check: VetoCheck
    #: ``vetoed``: the yes counts as no; ``flagged``: the yes stands, a human should look
    effect: Literal["vetoed", "flagged"]
    reason: str


class Answer(BaseModel):
    """One question's answer as the judge gave it, with the evidence check."""

    model_config = ConfigDict(frozen=True)

    question_id: str
    dimension_id: str
    #: the effective answer (after a downgrade of unverified evidence)
    answer: bool
    #: what the judge said
    judge_answer: bool
    #: the judge's words, as kept (``judge.calls.ServerText``)
    reasoning: ServerText = ""
    evidence: ServerText = ""
    #: whether the quote occurs in the diagnosis (``judge.evidence.check_quote``), for
    #: every quote given, whatever the question: the same quote gets the same outcome.
    #: None where there is no quote and none is needed (a no, or a question without one)
    evidence_verified: bool | None = None
    #: the quote check's outcome; None where nothing was checked
    evidence_check: QuoteCheck | None = None
    confidence: float | None = None
    #: the deterministic grounding check of a judge "yes" (``judge.grounding``): None
    #: where the question has no condition or the judge said no, else ``"passed: ..."``,
    #: ``"vetoed: ..."`` (counted as no) or ``"flagged: ..."`` (kept, sent to review)
    grounding: str | None = None
    #: the check in code that vetoed or flagged the judge's yes (the decisive one: a
    #: veto before a flag), or None
    veto: Veto | None = None


class Vote(BaseModel):
    """One judge's (or one sample's) answer to one question, with the call it came from."""

    model_config = ConfigDict(frozen=True)

    #: the judge that voted, ``BACKEND:MODEL[@BASE_URL]``
    judge_spec: str
    #: 0 for a single sample; n for the n-th sample of a self-consistent judge
    sample_index: int = 0
    question_id: str
    answer: bool
    confidence: float | None = None
    #: index of the judge call in ``GradingResult.calls`` the answer came from
    call_index: int | None = None


class GradingResult(BaseModel):
    """One rubric applied by one judge to one submission."""

    model_config = ConfigDict(frozen=True)

    status: Literal["graded", "unscored"]
    unscored_reason: str | None = None
    #: a human-readable account of why it is unscored, or notes such as ``empty_diagnosis``
    #: (it may quote a judge server's error: kept as ``judge.calls.ServerText``)
    detail: ServerText | None = None
    rubric_id: str
    rubric_version: str
    judge_backend: str
    judge_model: str
    answers: tuple[Answer, ...] = ()
    outcome: RuleOutcome | None = None
    #: the rule applied to the judge's own answers (before downgrades)
    judge_outcome: RuleOutcome | None = None
    review_reasons: tuple[str, ...] = ()
    calls: tuple[JudgeCall, ...] = ()
    #: the votes of a panel or of samples (``judge.panel``); empty for a single judge
    votes: tuple[Vote, ...] = ()

    @property
    def needs_review(self) -> bool:
        """A human should look at it."""
        return bool(self.review_reasons)

    @property
    def held(self) -> bool:
        """The rule passed but a review reason holds the pass until a human decides."""
        return bool(self.outcome and self.outcome.passed and holds_pass(self.review_reasons))

    @property
    def passed(self) -> bool | None:
        """The verdict in force: None when unscored, or when the pass is held."""
        if self.outcome is None or self.held:
            return None
        return self.outcome.passed
