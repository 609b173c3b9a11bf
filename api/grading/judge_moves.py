"""Pending work follows the configured judge, or an admin moves it.

A live grading records the judge configured when it was accepted. If the service is
restarted with another judge (``SRE_JUDGE_JUDGE`` or ``SRE_JUDGE_PANEL``), gradings
still pending with the old one would wait for it for ever. With
``SRE_JUDGE_PENDING_JUDGE=follow`` (the default) they move to the configured judge: all
that no worker holds when the workers start, and any other one when a worker claims it.
With ``pin`` they keep their judge until an admin moves them (``sre-judge gradings
move-judge``, ``POST /v1/gradings:move-judge``). Every move is audited per grading
(``grading.judge_moved``, ``storage.pending_judges``). Items of regrade jobs keep their
job's judge.
"""

from __future__ import annotations

import dataclasses
import logging

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from api.service.errors import InvalidRequest
from api.service.principal import Principal
from api.service.services import Services
from judge.errors import JudgeSpecError
from judge.masking import mask_passwords
from judge.spec import judge_identity, recorded_judge
from storage import Claim

__all__ = [
    "JudgeMoveReport",
    "JudgeMoveRequest",
    "follow_configured_judge",
    "follow_on_claim",
    "follows_configured_judge",
    "move_pending_gradings",
]

log = logging.getLogger("sre_judge.judge_moves")

#: the ``reason`` of a move made because the configured judge changed
FOLLOW_REASON = "configured judge changed"
#: the ``reason`` of a move an admin asked for
ADMIN_REASON = "moved by an admin"
#: the width of the judge spec column
_SPEC_CHARS = 512


class JudgeMoveRequest(BaseModel):
    """Which pending gradings move, and to which judge."""

    model_config = ConfigDict(extra="forbid")

    from_judge: StrictStr = Field(
        min_length=1,
        max_length=_SPEC_CHARS,
        description="the judge spec the gradings are bound to, as recorded or as /readyz "
        "shows it to admins (the credentials in its base URL masked)",
    )
    to_judge: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=_SPEC_CHARS,
        description="the judge (or panel:SPEC1,SPEC2) to bind them to; default the configured one",
    )


class JudgeMoveReport(BaseModel):
    """What a move did; the judge specs with the credentials in their base URLs masked."""

    from_judge: str = Field(description="the judge spec they were bound to")
    to_judge: str = Field(description="the judge spec they are bound to now")
    moved: int = Field(description="pending gradings moved (each audited)")


def follows_configured_judge(services: Services, claim: Claim) -> bool:
    """Whether a claimed grading is to move to the configured judge before grading."""
    settings = services.settings
    return (
        settings.pending_judge == "follow"
        and claim.regrade_job_id is None
        and claim.judge_spec != settings.grading_judge()[0]
    )


async def follow_configured_judge(services: Services, *, actor: str) -> int:
    """On start, with ``follow``: move every live pending grading that no worker holds
    from another judge to the configured one; how many moved."""
    settings = services.settings
    if settings.pending_judge != "follow":
        return 0
    target = settings.grading_judge()
    moved = await services.store.pending_judges.move(target, actor=actor, reason=FOLLOW_REASON)
    if moved:
        log.info(
            "%d pending gradings moved to the configured judge %s",
            len(moved),
            judge_identity(target[0]),
            extra={"moved": len(moved), "judge": judge_identity(target[0])},
        )
        services.waiters.work.set()
    return len(moved)


async def follow_on_claim(services: Services, claim: Claim, worker_id: str) -> Claim | None:
    """The claim to grade: moved to the configured judge first where it follows
    (``follows_configured_judge``); None when the worker lost the lease meanwhile."""
    if not follows_configured_judge(services, claim):
        return claim
    target = services.settings.grading_judge()
    moved = await services.store.pending_judges.move_claimed(
        claim.grading_id, worker_id, target, reason=FOLLOW_REASON, claim_count=claim.claim_count
    )
    if not moved:
        return None
    log.info(
        "grading moved to the configured judge",
        extra={"from": judge_identity(claim.judge_spec), "to": judge_identity(target[0])},
    )
    return dataclasses.replace(claim, judge_spec=target[0])


async def move_pending_gradings(
    services: Services, principal: Principal, data: JudgeMoveRequest
) -> JudgeMoveReport:
    """An admin moves the live pending gradings bound to ``from_judge`` to ``to_judge``.

    Gradings a worker is grading now are taken from it (its result is discarded, never
    stored) so that none waits for the old judge. With ``follow``, ``to_judge`` can only
    be the configured judge (they would move back to it when claimed).
    """
    settings = services.settings
    configured = settings.grading_judge()
    try:
        target = recorded_judge(data.to_judge) if data.to_judge else configured
    except JudgeSpecError as exc:
        raise InvalidRequest(str(exc), field="to_judge", title="Invalid judge") from None
    try:
        recorded_judge(data.from_judge)  # a spec that could never be recorded matches nothing
    except JudgeSpecError as exc:
        raise InvalidRequest(str(exc), field="from_judge", title="Invalid judge") from None
    if settings.pending_judge == "follow" and target[0] != configured[0]:
        raise InvalidRequest(
            f"pending gradings follow the configured judge {judge_identity(configured[0])} "
            "(SRE_JUDGE_PENDING_JUDGE=follow): move them to it, or set pin",
            field="to_judge",
        )
    specs = [spec for spec in await _bound_specs(services, data.from_judge) if spec != target[0]]
    if not specs:
        raise InvalidRequest("from_judge and to_judge name the same judge", field="from_judge")
    moved: list[str] = []
    for spec in specs:
        moved += await services.store.pending_judges.move(
            target, actor=principal.id, reason=ADMIN_REASON, from_spec=spec, take_leased=True
        )
    if moved:
        services.waiters.work.set()
    return JudgeMoveReport(
        from_judge=mask_passwords(data.from_judge),
        to_judge=mask_passwords(target[0]),
        moved=len(moved),
    )


async def _bound_specs(services: Services, named: str) -> list[str]:
    """The recorded judge specs ``named`` names: itself, or, when no live pending grading
    is bound to it as written, those whose masked form it is (``/readyz`` shows admins
    the specs with the credentials in their base URLs masked)."""
    pending = await services.store.pending_judges.by_judge()
    recorded = {row.judge_spec for row in pending if row.live}
    if named in recorded:
        return [named]
    return sorted(spec for spec in recorded if mask_passwords(spec) == named) or [named]
