"""The self-preference policy: a judge grading the text of its own model family.

Judges favour their own family's text, so when a judge (or a panel member) is of the
agent model's family (``judge.families``) the service either refuses the submission
(``SRE_JUDGE_SELF_PREFERENCE=refuse``: :func:`refuse`, called when a submission is
accepted) or grades it and sends the grading to review (``warn``, the default:
:func:`flag`, called by the workers on each graded result). Both decisions live here.
"""

from __future__ import annotations

from api.service.errors import InvalidRequest
from api.service.settings import Settings
from judge.families import shared_family
from judge.review_reasons import ReviewReason
from judge.verdict import GradingResult

__all__ = ["flag", "refuse"]


def refuse(settings: Settings, judge_spec: str, agent_model: str | None) -> None:
    """At acceptance: under ``refuse``, an agent model of a judge's own family is refused.

    Raises InvalidRequest naming ``model``; with ``warn`` nothing happens here and the
    grading is flagged instead (:func:`flag`).
    """
    if settings.self_preference != "refuse":
        return
    family = shared_family(judge_spec, agent_model)
    if family is not None:
        raise InvalidRequest(
            f"the judge and the model {agent_model!r} are both of the {family} family, and "
            "judges favour their own family's text (SRE_JUDGE_SELF_PREFERENCE=refuse)",
            field="model",
            title="Judge of the agent's own family",
        )


def flag(result: GradingResult, judge_spec: str, agent_model: str | None) -> GradingResult:
    """After grading: a graded result of a judge of the agent's family goes to review."""
    if result.status != "graded" or shared_family(judge_spec, agent_model) is None:
        return result
    reasons = (*result.review_reasons, ReviewReason.SELF_PREFERENCE)
    return result.model_copy(update={"review_reasons": reasons})
