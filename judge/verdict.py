"""Answers and grading results, graded or explicitly unscored."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from judge.calls import JudgeCall
from judge.rule import RuleOutcome

__all__ = ["Answer", "GradingResult", "UnscoredReason", "Vote"]

UnscoredReason = Literal[
    "unparseable_reply",
    "judge_unavailable",
    "judge_rate_limited",
    "judge_timeout",
    "judge_rejected",
    "judge_auth",
    "judge_error",
    "context_overflow",
]


class Answer(BaseModel):
    """One question's answer as the judge gave it, with the evidence check."""

    model_config = ConfigDict(frozen=True)

    question_id: str
    dimension_id: str
    #: the effective answer (after a downgrade of unverified evidence)
    answer: bool
    #: what the judge said
    judge_answer: bool
    reasoning: str = ""
    evidence: str = ""
    #: None where the question needs no quote or the answer is no
    evidence_verified: bool | None = None
    confidence: float | None = None
    #: the deterministic grounding check of a judge "yes" (``judge.grounding``): None
    #: where the question has no condition or the judge said no, else ``"passed: ..."``,
    #: ``"vetoed: ..."`` (counted as no) or ``"flagged: ..."`` (kept, sent to review)
    grounding: str | None = None


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
    detail: str | None = None
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

    def grading_object(self) -> dict[str, Any]:
        """The public grading object of CONTRACT.md, without ids (the service adds them)."""
        outcome = self.outcome
        judge_outcome = self.judge_outcome
        return {
            "status": self.status,
            "unscored_reason": self.unscored_reason,
            "detail": self.detail,
            "rubric": {"id": self.rubric_id, "version": self.rubric_version},
            "judge": {"backend": self.judge_backend, "model": self.judge_model},
            "answers": [
                {
                    "question_id": a.question_id,
                    "dimension_id": a.dimension_id,
                    "answer": "yes" if a.answer else "no",
                    "judge_answer": "yes" if a.judge_answer else "no",
                    "reasoning": a.reasoning,
                    "evidence": a.evidence,
                    "evidence_verified": a.evidence_verified,
                    "confidence": a.confidence,
                    "grounding": a.grounding,
                    "overridden": False,
                    "votes": [
                        {
                            "judge": v.judge_spec,
                            "sample": v.sample_index,
                            "answer": "yes" if v.answer else "no",
                            "confidence": v.confidence,
                        }
                        for v in self.votes
                        if v.question_id == a.question_id
                    ],
                }
                for a in self.answers
            ],
            "dimensions": [
                {"id": d.id, "name": d.name, "yes": d.yes, "total": d.total}
                for d in (outcome.dimensions if outcome else ())
            ],
            "yes_count": outcome.yes_count if outcome else None,
            "composite": outcome.composite if outcome else None,
            "passed": outcome.passed if outcome else None,
            "judge_passed": judge_outcome.passed if judge_outcome else None,
            "decisive": outcome.decisive if outcome else None,
            "needs_review": self.needs_review,
            "review_reasons": list(self.review_reasons),
        }
