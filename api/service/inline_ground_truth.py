"""Who may send a ground truth of their own (``SRE_JUDGE_INLINE_GROUND_TRUTH``): one
decision, for a submission (``api.grading``) and an imported JSON line (``api.imports``).

A ground truth sent with a submission is whatever the sender wrote: a harness that holds
the scenario's answer (SREGym's conductor) is the normal case, but a sender could also
write an answer its diagnosis matches and grade itself. ``allow`` trusts every sender,
``per_token`` those granted it (a token an admin granted it, and admins), ``deny`` none:
registered scenarios only.
"""

from __future__ import annotations

from api.service.settings import Settings

__all__ = ["inline_ground_truth_refusal"]


def inline_ground_truth_refusal(settings: Settings, *, granted: bool) -> str | None:
    """Why a ground truth of the sender's own is not taken here, or None when it is.

    ``granted``: the sender holds what ``per_token`` asks for (a token an admin granted
    it, or an admin's; an import is an admin's: its route takes admin tokens only and
    the command line runs with the service's own database)."""
    policy = settings.inline_ground_truth
    if policy == "allow" or (policy == "per_token" and granted):
        return None
    why = (
        "this service grades against registered scenarios only"
        if policy == "deny"
        else "this token was not granted its own ground truth (an admin grants it per token)"
    )
    return f"a ground truth may not be sent with the submission: {why}; send scenario_id instead"
