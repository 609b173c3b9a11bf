"""A held pass confirmed by a second judge of a different model (``SRE_JUDGE_CONFIRM_JUDGE``).

When a pass is held only for reasons that concern the judge that made it (it has not
qualified, or its reply contradicts the checks in code: ``judge_not_qualified``,
``evidence_unverified``, ``judge_overruled``, ``grounding_failed``,
``reasoning_contradicts``), the confirming judge grades the same diagnosis against the
same ground truth. Its own pass, carrying no injection signal, by a judge the pass
policy trusts (under ``qualified``, one a calibration run qualified), releases the hold:
those reasons leave the grading, and ``detail`` says which judge confirmed it and what
was held. Anything else (a fail, no verdict, its own signal) keeps the pass held for a
human, and ``detail`` says why. A diagnosis that screening flagged
(``injection_suspected``) is never confirmed by a judge: only an adjudicator releases it;
nor is one of an agent model of the confirming judge's own family (judges favour their
family's text).
Every call of the confirming judge is kept with the grading's judge calls, also when
the service fails after it answered (``ConfirmationFailed`` brings them to the failure).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from api.service.grader_factory import asking_choice
from api.service.judging import build_grader
from judge.errors import InputError, JudgeSpecError
from judge.families import shared_family
from judge.review_reasons import INJECTION_SIGNALS, ReviewReason, holding_reasons
from judge.rubric import Rubric
from judge.spec import judge_identity, member_specs, parse_judge_spec
from judge.verdict import GradingResult

if TYPE_CHECKING:
    from api.service.qualification import Qualifications
    from api.service.services import Services
    from judge.calls import JudgeCall
    from storage.models import Claim

__all__ = ["CONFIRMABLE", "ConfirmationFailed", "confirmable", "confirmed"]

#: holds a second judge's clean pass may release: they concern the first judge
CONFIRMABLE = frozenset(INJECTION_SIGNALS - {ReviewReason.INJECTION_SUSPECTED}) | {
    ReviewReason.JUDGE_NOT_QUALIFIED
}


class ConfirmationFailed(Exception):
    """An error of the service's own (``error``) in ``confirmed`` after the confirming
    judge answered: ``calls`` are the grading's judge calls, the confirming judge's
    among them, for the failed try to store."""

    def __init__(self, error: Exception, calls: tuple[JudgeCall, ...]) -> None:
        super().__init__(f"confirming a held pass failed: {type(error).__name__}")
        self.error = error
        self.calls = calls


def _note(result: GradingResult, text: str) -> str:
    return "; ".join(part for part in (result.detail, text) if part)


def _same_model(confirm_spec: str, judge_spec: str) -> bool:
    """Whether the confirming judge is of a model that graded (a panel's members too): a
    model asked again confirms nothing."""
    try:
        confirming = parse_judge_spec(confirm_spec).model
        graded = {parse_judge_spec(member).model for member in member_specs(judge_spec)}
    except JudgeSpecError:
        return False
    return confirming in graded


def confirmable(confirm_spec: str | None, result: GradingResult) -> bool:
    """Whether ``confirmed`` has a say on ``result`` with the confirming judge
    ``confirm_spec``: one is set and the pass is held only for reasons it may release
    (asked, or not for its model or family: either way ``detail`` says so)."""
    if confirm_spec is None or not result.held:
        return False
    return set(holding_reasons(result.review_reasons)) <= CONFIRMABLE


async def confirmed(
    services: Services,
    qualifications: Qualifications,
    claim: Claim,
    rubric: Rubric | None,
    result: GradingResult,
) -> GradingResult:
    """``result``, its hold released when the confirming judge passes the diagnosis
    cleanly; unchanged when no confirming judge is set or the hold is not confirmable.
    An error after the confirming judge answered is raised as ``ConfirmationFailed``,
    which carries its calls."""
    spec = services.settings.confirm_judge
    if spec is None or rubric is None or not confirmable(spec, result):
        return result
    if _same_model(spec, claim.judge_spec):  # a regrade job's judge may be the confirmer's
        note = f"held pass not confirmed: {judge_identity(spec)} is a judge of its own model"
        return result.model_copy(update={"detail": _note(result, note)})
    family = shared_family(spec, claim.agent_model)
    if family is not None:  # the pass that would decide is the one self-preference doubts
        note = (
            f"held pass not confirmed: {judge_identity(spec)} is of the agent model's "
            f"{family} family"
        )
        return result.model_copy(update={"detail": _note(result, note)})
    try:
        confirming = build_grader(
            services, spec, namespace=claim.cache_namespace, reads_cache=claim.reads_cache
        )
        second = await confirming.grade(
            rubric, claim.ground_truth, claim.diagnosis, screening=claim.screened()
        )
    except (JudgeSpecError, InputError) as exc:
        return result.model_copy(update={"detail": _note(result, f"not confirmed: {exc}")})
    asked = result.model_copy(update={"calls": (*result.calls, *second.calls)})
    try:  # its calls are made: whatever fails from here, they reach the grading's history
        return await _decided(services, qualifications, spec, rubric, asked, second)
    except Exception as exc:
        raise ConfirmationFailed(exc, asked.calls) from exc


async def _decided(
    services: Services,
    qualifications: Qualifications,
    spec: str,
    rubric: Rubric,
    result: GradingResult,
    second: GradingResult,
) -> GradingResult:
    """``result`` (the confirming judge's calls among its own) as ``second``, the
    confirming judge's grading by ``spec``, decides: its hold released, or why not in
    ``detail``."""
    held = holding_reasons(result.review_reasons)
    why_not = None
    outcome = second.outcome
    if outcome is None:
        why_not = f"it could not grade it ({second.unscored_reason})"
    elif not outcome.passed:
        why_not = f"it failed it ({outcome.yes_count} yes)"
    elif holding_reasons(second.review_reasons):
        why_not = f"its own pass carries {', '.join(holding_reasons(second.review_reasons))}"
    elif services.settings.pass_policy == "qualified" and not await qualifications.qualified(
        spec, rubric.version, asking_choice(services.settings, spec, rubric)
    ):
        why_not = "it is not qualified now either"
    if why_not is not None or outcome is None:  # (no outcome has its why_not)
        note = f"held pass not confirmed by {judge_identity(spec)}: {why_not}"
        return result.model_copy(update={"detail": _note(result, note)})
    kept = tuple(r for r in result.review_reasons if r not in CONFIRMABLE)
    note = (
        f"pass confirmed by {judge_identity(spec)} ({outcome.yes_count} yes, "
        "no injection signal); "
        f"it was held for {', '.join(held)}"
    )
    return result.model_copy(update={"review_reasons": kept, "detail": _note(result, note)})
