"""Why a grading needs a human: the review reasons, most urgent first.

The members' order is their priority: the review queue lists gradings by their most
urgent reason, and a grading's reasons are shown in this order. The values are what
the API, the exports and the stored ``review_reasons`` carry; they never change.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = ["HOLDING_REASONS", "ReviewReason", "by_priority", "holds_pass"]


class ReviewReason(StrEnum):
    """A reason for human review; compare and serialise it as its string value."""

    #: the judge gave no usable answer
    UNSCORED = "unscored"
    #: a quoted piece of evidence is not in the diagnosis
    EVIDENCE_UNVERIFIED = "evidence_unverified"
    #: a human override of the previous grading could not be carried by a regrade
    OVERRIDE_OUTDATED = "override_outdated"
    #: the judges of a panel disagree
    JUDGE_SPLIT = "judge_split"
    NEEDS_REVIEW = "needs_review"
    #: one answer decides the verdict
    DECISIVE = "decisive"
    #: a judge answer below the confidence threshold
    LOW_CONFIDENCE = "low_confidence"
    #: the judge is of the agent model's own family
    SELF_PREFERENCE = "self_preference"
    #: a sampled grading of a judge no calibration run qualified
    PROVISIONAL_SAMPLE = "provisional_sample"
    #: the diagnosis held a credential (redacted before the judge saw it)
    CREDENTIAL_LEAKED = "credential_leaked"
    #: the diagnosis addresses the judge
    INJECTION_SUSPECTED = "injection_suspected"
    #: the diagnosis is not grounded in the ground truth's facts
    GROUNDING_FAILED = "grounding_failed"
    #: the judge's reasoning says the opposite of its answer (``judge.consistency``)
    REASONING_CONTRADICTS = "reasoning_contradicts"

    @property
    def priority(self) -> int:
        """0 for the most urgent reason, then 1, 2, ...: the members' order."""
        return _PRIORITY[self]


#: reasons that hold a pass for a human: the judge may have followed the diagnosis'
#: instructions instead of grading it, so its pass counts only once an adjudicator agrees
HOLDING_REASONS = frozenset({ReviewReason.INJECTION_SUSPECTED})


def holds_pass(reasons: Iterable[str]) -> bool:
    """Whether a pass by the rule waits for a human verdict, given the review reasons."""
    return any(reason in HOLDING_REASONS for reason in reasons)


_PRIORITY = {reason: rank for rank, reason in enumerate(ReviewReason)}


def by_priority(reasons: Iterable[str]) -> tuple[str, ...]:
    """``reasons`` without repeats, most urgent first (unknown ones last, as given)."""
    last = len(_PRIORITY)

    def rank(reason: str) -> int:
        try:
            return ReviewReason(reason).priority
        except ValueError:
            return last

    return tuple(sorted(dict.fromkeys(reasons), key=rank))
