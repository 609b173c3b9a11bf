"""Who may send their own ground truth, and which rubrics a submitter may ask for.

A ground truth sent with a submission is whatever the sender wrote: a harness that holds
the scenario's answer (SREGym's conductor) is the normal case, but a submitter could also
write an answer its diagnosis matches and grade itself. ``SRE_JUDGE_INLINE_GROUND_TRUTH``
says whom to trust with that (:mod:`api.service.inline_ground_truth`, which imports
apply too); ``SRE_JUDGE_SUBMITTER_RUBRICS`` keeps submitters off
lenient rubrics an admin loaded for experiments.
"""

from __future__ import annotations

from api.service.errors import NotPermitted
from api.service.inline_ground_truth import inline_ground_truth_refusal
from api.service.principal import Principal
from api.service.settings import Settings

__all__ = ["check_inline_ground_truth", "check_rubric_choice"]


def check_inline_ground_truth(settings: Settings, principal: Principal) -> None:
    """Raise NotPermitted (field ``ground_truth``) when ``principal`` may not send one."""
    granted = principal.inline_ground_truth or principal.role == "admin"
    refusal = inline_ground_truth_refusal(settings, granted=granted)
    if refusal is not None:
        raise NotPermitted(refusal, field="ground_truth")


def check_rubric_choice(settings: Settings, principal: Principal, rubric_id: str) -> None:
    """Raise NotPermitted (field ``rubric``) when a submitter asks for a rubric not allowed."""
    if principal.at_least("adjudicator") or rubric_id == settings.rubric:
        return
    allowed = {r.strip() for r in settings.submitter_rubrics.split(",") if r.strip()}
    if "*" in allowed or rubric_id.split("@", 1)[0] in allowed:
        return
    raise NotPermitted(
        f"submitters may not ask for rubric {rubric_id!r} here (allowed: the default "
        f"{settings.rubric!r}" + (f", {', '.join(sorted(allowed))}" if allowed else "") + ")",
        field="rubric",
    )
