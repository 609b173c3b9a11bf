"""Why a grading needs a human: the review reasons, most urgent first.

The members' order is their priority, in the review queue's tiers: a missing verdict
(``unscored``; a held pass, which no one reason names, comes before it), then signs
that the verdict may be wrong, then a verdict one answer decides (``decisive``), then
flags that ask for a look (``evidence_unverified`` and the rest). The queue ranks a
grading by its tier (``api.adjudication.review_queries``), and a grading's reasons are
shown in this order. The values are what the API, the exports and the stored
``review_reasons`` carry; they never change.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = [
    "HOLDING_REASONS",
    "INJECTION_SIGNALS",
    "ReviewReason",
    "by_priority",
    "hold_explanation",
    "holding_reasons",
    "holds_pass",
]


class ReviewReason(StrEnum):
    """A reason for human review; compare and serialise it as its string value."""

    #: the judge gave no usable answer
    UNSCORED = "unscored"
    #: the judges of a panel disagree
    JUDGE_SPLIT = "judge_split"
    #: a judge answer below the confidence threshold
    LOW_CONFIDENCE = "low_confidence"
    #: the diagnosis addresses the judge
    INJECTION_SUSPECTED = "injection_suspected"
    #: the diagnosis is not grounded in the ground truth's facts
    GROUNDING_FAILED = "grounding_failed"
    #: the judge's reasoning says the opposite of its answer (``judge.consistency``)
    REASONING_CONTRADICTS = "reasoning_contradicts"
    #: a check in code vetoed a "yes" of the judge (its quote is not in the diagnosis,
    #: the fault's component or values are not named there) and the rule still passes:
    #: the judge said yes to what the diagnosis does not hold
    JUDGE_OVERRULED = "judge_overruled"
    #: one answer decides the verdict
    DECISIVE = "decisive"
    #: a quoted piece of evidence is not in the diagnosis
    EVIDENCE_UNVERIFIED = "evidence_unverified"
    #: a human override of the previous grading could not be carried by a regrade
    OVERRIDE_OUTDATED = "override_outdated"
    NEEDS_REVIEW = "needs_review"
    #: the judge is of the agent model's own family
    SELF_PREFERENCE = "self_preference"
    #: a sampled grading of a judge no calibration run qualified
    PROVISIONAL_SAMPLE = "provisional_sample"
    #: the diagnosis held a credential (redacted before the judge saw it)
    CREDENTIAL_LEAKED = "credential_leaked"
    #: the pass policy holds passes of a judge no calibration run qualified
    JUDGE_NOT_QUALIFIED = "judge_not_qualified"

    @property
    def priority(self) -> int:
        """0 for the most urgent reason, then 1, 2, ...: the members' order."""
        return _PRIORITY[self]


#: signs that the judge may have followed the diagnosis instead of grading it: markers
#: found by screening, or a reply the checks in code contradict (a quote that is not in
#: the diagnosis, a "yes" vetoed or flagged by grounding, reasoning against the answer).
#: Screening is one signal among these, not the gate: a disguise it misses still leaves
#: the judge's yes answers to be checked against the diagnosis.
INJECTION_SIGNALS = frozenset(
    {
        ReviewReason.INJECTION_SUSPECTED,
        ReviewReason.EVIDENCE_UNVERIFIED,
        ReviewReason.JUDGE_OVERRULED,
        ReviewReason.GROUNDING_FAILED,
        ReviewReason.REASONING_CONTRADICTS,
    }
)

#: reasons that hold a pass for a human: any injection signal, and a judge the pass
#: policy does not trust on its own; the pass counts only once an adjudicator agrees
HOLDING_REASONS = INJECTION_SIGNALS | {ReviewReason.JUDGE_NOT_QUALIFIED}

#: what each holding reason says to a reader of a held pass
_HOLD_WORDS = {
    ReviewReason.INJECTION_SUSPECTED: "the diagnosis carries injection markers",
    ReviewReason.EVIDENCE_UNVERIFIED: "a quote of the judge is not in the diagnosis",
    ReviewReason.JUDGE_OVERRULED: "a check in code vetoed a yes of the judge",
    ReviewReason.GROUNDING_FAILED: "a yes of the judge is not grounded in the ground truth",
    ReviewReason.REASONING_CONTRADICTS: "the judge's reasoning contradicts its answer",
    ReviewReason.JUDGE_NOT_QUALIFIED: (
        "the judge is not qualified now (no calibration run qualified it, its model changed "
        "since the one that did, or the drift canary demoted it)"
    ),
}


def holding_reasons(reasons: Iterable[str]) -> tuple[str, ...]:
    """The reasons among ``reasons`` that hold a pass, most urgent first."""
    return by_priority(reason for reason in reasons if reason in HOLDING_REASONS)


def holds_pass(reasons: Iterable[str]) -> bool:
    """Whether a pass by the rule waits for a human verdict, given the review reasons."""
    return any(reason in HOLDING_REASONS for reason in reasons)


def hold_explanation(reasons: Iterable[str]) -> str:
    """Why a pass is held, in words (``"the diagnosis carries injection markers; ..."``)."""
    held = holding_reasons(reasons)
    return "; ".join(_HOLD_WORDS[ReviewReason(reason)] for reason in held) or "held for review"


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
