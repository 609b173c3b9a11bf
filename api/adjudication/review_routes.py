"""The review queue: gradings that need a human, claims, blind labels."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter
from pydantic import BaseModel, ConfigDict, Field

from api.adjudication import use_cases as adjudication
from api.adjudication.review_queries import MAX_PAGE, ReviewItem
from api.adjudication.use_cases import review_items
from api.http.auth import require
from api.service.presenters import render_gradings
from api.service.principal import Principal
from api.service.services import Services
from judge.review_reasons import ReviewReason
from storage import GradingView
from storage.review_tables import ReviewClaimRecord

__all__ = [
    "assign_review",
    "claim_review",
    "finish_review",
    "label_grading",
    "review_queue",
    "skip_review",
]


#: the reasons an item can be in the queue for (``reason=`` keeps one)
REASONS = [reason.value for reason in ReviewReason]


class ClaimCreate(BaseModel):
    """How long to hold an item."""

    model_config = ConfigDict(extra="forbid")

    minutes: float | None = Field(default=None, gt=0, le=24 * 60, strict=True)  # "5" is no number


class SkipCreate(BaseModel):
    """Why an item is skipped, for the next adjudicator (optional)."""

    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(default=None, max_length=adjudication.SKIP_NOTE_LIMIT)


class AssignmentCreate(BaseModel):
    """Who reviews an item: an adjudicator's or admin's token id or name; null unassigns."""

    model_config = ConfigDict(extra="forbid")

    assignee: str | None = Field(max_length=128)


def _review_state(claim: ReviewClaimRecord | None, holder: str | None) -> dict[str, Any]:
    """Who holds (``holder``), was assigned and last skipped an item, by name (never a
    token id)."""
    skipped = None
    if claim is not None and claim.skipped_at is not None:
        skipped = {"by": claim.skipped_by_name, "at": claim.skipped_at, "note": claim.skip_note}
    return {
        "claimed_by": holder,
        "assigned_to": claim.assigned_to_name if claim else None,
        "skipped": skipped,
    }


class LabelsCreate(BaseModel):
    """A human's own answers, given without seeing the judge's (blind review)."""

    model_config = ConfigDict(extra="forbid")

    answers: dict[str, Literal["yes", "no"]] = Field(min_length=1)
    verdict: Literal["pass", "fail"] | None = None


def _blind_item(item: ReviewItem) -> dict[str, Any]:
    g, s = item.grading, item.submission
    return {
        "grading_id": g.id,
        "reasons": list(item.reasons),
        "rubric": {"id": g.rubric_id, "version": g.rubric_version},
        "agent": s.agent,
        "scenario_id": s.scenario_id,
        "diagnosis": s.diagnosis,
        "ground_truth": item.ground_truth,
        "created_at": g.created_at,
        **_review_state(item.claim, item.holder),
    }


@get("/v1/review-queue", guards=[require("adjudicator")], operation_id="reviewQueue")
async def review_queue(
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    agent: FromQuery[str | None] = None,
    scenario_id: FromQuery[str | None] = None,
    reason: Annotated[str | None, QueryParameter(schema_extra={"enum": REASONS})] = None,
    blind: FromQuery[bool] = False,
    assigned: Annotated[Literal["me"] | None, QueryParameter()] = None,
    cursor: FromQuery[str | None] = None,
    limit: Annotated[int, QueryParameter(ge=1, le=MAX_PAGE)] = 50,
) -> dict[str, Any]:
    """Most urgent first: a missing verdict (a held pass, then unscored), then signs that
    the verdict may be wrong (split votes, low confidence, an overruled yes, contradicting
    reasoning, suspected injection, failed grounding), then decisive, then flags that ask
    for a look (unverified evidence, other reasons); within each, failures before passes,
    then oldest first. ``blind=true`` hides the judge's answers until you label the item;
    ``assigned=me`` keeps the items assigned to you. Each item says who holds it, who it
    is assigned to and who skipped it last with their note, by name. ``limit`` items a
    page; ``next_cursor`` (null on the last page) passed back as ``cursor`` gives the
    next, continuing in the queue's order after the page's last item; an edited or
    forged cursor is a 400 naming ``cursor``."""
    page = await review_items(
        services,
        principal,
        agent=agent,
        scenario_id=scenario_id,
        reason=reason,
        assigned_to_me=assigned == "me",
        cursor=cursor,
        limit=limit,
    )
    items = page.items
    if blind:
        blinded = [_blind_item(i) for i in items]
        return {"blind": True, "items": blinded, "next_cursor": page.next_cursor}
    views = [_view(i) for i in items]
    gradings = await render_gradings(services, views, principal)
    return {
        "blind": False,
        "items": [
            {
                "grading": grading,
                "reasons": list(item.reasons),
                **_review_state(item.claim, item.holder),
            }
            for grading, item in zip(gradings, items, strict=True)
        ],
        "next_cursor": page.next_cursor,
    }


def _view(item: ReviewItem) -> GradingView:
    return GradingView(grading=item.grading, answers=item.answers, submission=item.submission)


@post(
    "/v1/review-queue/{grading_id:str}/claim",
    guards=[require("adjudicator")],
    operation_id="claimReview",
    status_code=200,
)
async def claim_review(
    grading_id: FromPath[str],
    data: JSONBody[ClaimCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Hold an item so nobody else reviews it; 409 while another adjudicator holds it."""
    claim = await adjudication.claim_review(services, principal, grading_id, minutes=data.minutes)
    return {"grading_id": grading_id, "claimed_by": principal.name, "until": claim.claimed_until}


@post(
    "/v1/review-queue/{grading_id:str}/done",
    guards=[require("adjudicator")],
    operation_id="finishReview",
    status_code=200,
)
async def finish_review(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, str]:
    """The item leaves the queue."""
    await adjudication.finish_review(services, principal, grading_id)
    return {"grading_id": grading_id, "state": "done"}


@post(
    "/v1/review-queue/{grading_id:str}/skip",
    guards=[require("adjudicator")],
    operation_id="skipReview",
    status_code=200,
)
async def skip_review(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    data: JSONBody[SkipCreate],
) -> dict[str, Any]:
    """Skip an item (``{}``, or ``{"note": ...}`` for other adjudicators, who see it on
    the queue and the grading page); a claim you held on it is given back, and it stays
    in the queue."""
    state = await adjudication.skip_review(services, principal, grading_id, note=data.note)
    return {"grading_id": grading_id, **_review_state(state.claim, state.holder)}


@post(
    "/v1/review-queue/{grading_id:str}/assign",
    guards=[require("adjudicator")],
    operation_id="assignReview",
    status_code=200,
)
async def assign_review(
    grading_id: FromPath[str],
    data: JSONBody[AssignmentCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Assign an item to an adjudicator or admin (``assignee``: a token id or name; 422
    naming ``assignee`` when nobody who may review answers to it), or unassign it with
    ``{"assignee": null}``."""
    state = await adjudication.assign_review(services, principal, grading_id, data.assignee)
    return {"grading_id": grading_id, **_review_state(state.claim, state.holder)}


@post(
    "/v1/gradings/{grading_id:str}/labels",
    guards=[require("adjudicator")],
    operation_id="labelGrading",
    status_code=201,
)
async def label_grading(
    grading_id: FromPath[str],
    data: JSONBody[LabelsCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Store your own answers as human labels (also where they agree with the judge),
    finish the review, and return the judge's grading for comparison."""
    fresh = await adjudication.label_grading(
        services,
        principal,
        grading_id,
        answers={q: a == "yes" for q, a in data.answers.items()},
        verdict=data.verdict,
    )
    [grading] = await render_gradings(services, [fresh], principal)
    return {"labels": data.answers, "verdict": data.verdict, "grading": grading}
