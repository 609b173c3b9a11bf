"""Who may see what of a grading: owners and adjudicators read it; a ground truth, and
anything written with it in view, only reaches those allowed to see the ground truth."""

from __future__ import annotations

from api.service.principal import Principal
from api.service.schemas import GradingPublic
from judge.spec import judge_identity, model_identity
from storage.tables import SubmissionRecord

__all__ = [
    "WITHHELD_FIELDS",
    "can_read",
    "can_see_ground_truth",
    "hide_judge_addresses",
    "withhold_ground_truth",
]


def can_read(principal: Principal, submission: SubmissionRecord) -> bool:
    """Owners, adjudicators and admins read a grading."""
    return principal.at_least("adjudicator") or submission.submitted_by == principal.id


def can_see_ground_truth(principal: Principal, submission: SubmissionRecord) -> bool:
    """A submitter sees a ground truth only if it sent it itself."""
    if principal.at_least("adjudicator"):
        return True
    return submission.ground_truth_source == "inline" and submission.submitted_by == principal.id


#: what a judge or a human writes with the ground truth in view
WITHHELD_FIELDS = (
    "detail",
    "answers.reasoning",
    "answers.evidence",
    "answers.grounding",
    "answers.veto",
    "overrides.reason",
    "tags.note",
    "scenario_version",
)


def withhold_ground_truth(public: GradingPublic) -> GradingPublic:
    """The grading object without any text derived from a ground truth the reader may not
    see: verdicts, answers, counts and reason codes stay; ``withheld`` names what went."""
    return public.model_copy(
        update={
            "detail": None,
            "scenario_version": None,
            "answers": [
                a.model_copy(
                    update={"reasoning": "", "evidence": "", "grounding": None, "veto": None}
                )
                for a in public.answers
            ],
            "overrides": [o.model_copy(update={"reason": ""}) for o in public.overrides],
            "tags": [t.model_copy(update={"note": ""}) for t in public.tags],
            "withheld": list(WITHHELD_FIELDS),
        }
    )


def hide_judge_addresses(public: GradingPublic) -> GradingPublic:
    """The grading object with its votes' judges as ``backend:model``: where a judge runs
    (an internal URL) is for adjudicators and admins."""
    judge = public.judge
    return public.model_copy(
        update={
            "judge": {**judge, "model": model_identity(judge["backend"], judge["model"])},
            "answers": [
                a.model_copy(
                    update={
                        "votes": [
                            v.model_copy(update={"judge": judge_identity(v.judge)}) for v in a.votes
                        ]
                    }
                )
                for a in public.answers
            ],
        }
    )
