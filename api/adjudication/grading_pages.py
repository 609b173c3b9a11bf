"""One grading's page, the list of gradings, and overrides sent from the page."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath, FromQuery
from litestar.response import Redirect, Template
from pydantic import ValidationError

from api.adjudication.grading_view import changed_since, grading_page_context, verdict_label
from api.adjudication.queue_pages import carried_walk, claim_withheld
from api.adjudication.submitter_view import submitter_page_context
from api.adjudication.use_cases import append_override, claim_review, grading_page_parts
from api.service.presenters import readable_gradings
from api.service.principal import Principal
from api.service.schemas import GradingPublic, OverrideCreate
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from storage import GradingFilter
from storage.errors import Conflict, PreconditionFailed, Superseded
from storage.search import InvalidSearch, parse_search
from storage.tables import RESULT_STATUSES, GradingRecord

__all__ = [
    "PageOffers",
    "grading_list",
    "grading_page",
    "override_from_page",
    "page_offers",
    "related_standing",
    "render_grading_page",
]

#: the verdict labels a page shows (``grading_view.verdict_label``)
VERDICT_LABELS = frozenset({"PASS", "FAIL", "HELD", "UNSCORED", "PENDING"})
#: what an override confirmation may name: a question id (as rubrics allow) or the verdict
_SAVED = re.compile(r"[A-Za-z0-9_.-]{1,32}")


@dataclass(frozen=True)
class PageOffers:
    """What a grading's pages offer the signed-in person: exactly what the service takes
    from them in the grading's state, so that no button shown is always refused.

    A grading a promoted regrade superseded takes none of it (its page links the grading
    in force, where the review goes on); one without a result (pending, or an item of a
    cancelled regrade job) takes no override, no **Done** and no blind labels, which
    would decide before the judge's result is in; a held pass is not finished by
    **Done** nor by labels: a verdict override decides it."""

    #: answer and verdict overrides
    override: bool = False
    #: failure tags added and removed
    tag: bool = False
    #: **Done, next**: the review finished
    finish: bool = False
    #: **Skip**
    skip: bool = False
    #: blind labels (which finish the review too)
    label: bool = False
    #: why the grading takes no override, **Done** nor labels yet, in words ("" when it
    #: has a result or is superseded)
    no_result: str = ""
    #: the cancelled regrade job to resume before the grading takes them, if that is why
    resume_job: str | None = None

    def label_form(self, *, refused: bool) -> bool:
        """Whether the blind-label page shows its form: when labels are taken, and after
        labels were refused (the answers sent kept, to send again) on a grading that may
        take them later: a held pass once a verdict decides it, a pending one once graded.
        Never on a superseded grading: its labels go on the grading in force."""
        return self.label or (refused and self.skip)  # skip: its review goes on here


def page_offers(principal: Principal, grading: GradingPublic) -> PageOffers:
    """What ``principal`` is offered on ``grading``'s pages (:class:`PageOffers`)."""
    if not principal.at_least("adjudicator") or grading.superseded_by is not None:
        return PageOffers()
    has_result = grading.status in RESULT_STATUSES
    decides = has_result and not grading.held
    cancelled = grading.status == "cancelled"
    if has_result:
        why = ""
    elif cancelled:
        why = (
            "Its regrade job was cancelled before the judge answered: the job must be "
            "resumed first. Overrides, Done and blind labels wait for its result."
        )
    else:
        why = (
            "The judge has not answered yet: overrides, Done and blind labels wait for its result."
        )
    return PageOffers(
        override=has_result,
        tag=True,
        finish=decides,
        skip=True,
        label=decides,
        no_result=why,
        resume_job=grading.regrade_job_id if cancelled else None,
    )


def related_standing(grading: GradingRecord, modes: Mapping[str, str]) -> str:
    """What another grading of the submission is, as its link says: ``current`` (the
    verdict reports count), ``superseded`` (a promote replaced it), a ``shadow regrade``,
    or an item of a promote regrade not promoted (yet: pending, or its job cancelled; or
    not at all: no result to promote, or a human verdict that could not be carried onto
    it keeps the old grading in force). ``modes``: the mode of each regrade job, by id."""
    if grading.is_current:
        return "current"
    if grading.superseded_by is not None:
        return "superseded"
    mode = modes.get(grading.regrade_job_id or "")
    if mode == "shadow":
        return "shadow regrade"
    if mode == "promote":
        has_result = grading.status in RESULT_STATUSES
        return "promote regrade, not promoted" + ("" if has_result else " yet")
    return "not current"


async def render_grading_page(
    services: Services,
    who: SignedIn,
    grading_id: str,
    *,
    status_code: int = 200,
    claim_note: str = "",
    pending: dict[str, str] | None = None,
    error: str = "",
    stale: tuple[int, set[str]] | None = None,
    tag_sent: dict[str, str] | None = None,
    tag_error: tuple[str, str] | None = None,
    saved: str | None = None,
    was: str | None = None,
) -> Template:
    """The grading's page as ``who`` may see it, read in one snapshot. A form it refused
    comes back filled in: ``pending`` (an override, with ``error``), ``stale`` (an override
    sent from the page at that revision, with the overrides it showed: what changed
    since is listed) or ``tag_sent`` (a failure tag, with ``tag_error``: the field at
    fault and why)."""
    principal = who.principal
    parts = await grading_page_parts(services, principal, grading_id)  # one snapshot
    grading, rubric = parts.grading, parts.rubric
    related_rows = [
        (r, verdict_label(r), related_standing(v.grading, parts.regrade_modes))
        for r, v in parts.related
    ]
    if not isinstance(grading, GradingPublic):  # a submitter's view: what its API answer holds
        return page(
            "grading_submitter.html",
            who,
            status_code=status_code,
            **submitter_page_context(grading, rubric),
            related=related_rows,
        )
    return page(
        "grading.html",
        who,
        status_code=status_code,
        **grading_page_context(grading, rubric, parts.ground_truth),
        history=parts.history,
        vocabulary=parts.vocabulary,
        canned_reasons=parts.canned_reasons,
        review=parts.review,
        related=related_rows,
        claim_note=claim_note,
        saved=saved,
        was=was,
        pending=pending or {},
        error=error,
        conflict=(
            changed_since(grading, parts.history, revision=stale[0], seen=stale[1])
            if stale is not None
            else None
        ),
        tag_sent=tag_sent or {},
        tag_error_field=tag_error[0] if tag_error else "",
        tag_error=tag_error[1] if tag_error else "",
        offers=page_offers(principal, grading),
    )


@get("/gradings/{grading_id:str}", guards=[web_require("submitter")], include_in_schema=False)
async def grading_page(
    request: Request[Any, Any, Any],
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    claim: FromQuery[bool] = False,
    saved: FromQuery[str | None] = None,
    was: FromQuery[str | None] = None,
) -> Template:
    """The grading side by side with its ground truth; ``claim=true`` (from the queue)
    holds it for the adjudicator opening it, unless a page of another origin opened it
    (:func:`claim_withheld`: shown, not claimed); ``saved`` (a question id, or
    ``verdict``) and ``was`` (the verdict shown before) confirm an override just saved."""
    note = ""
    if claim and who.principal.at_least("adjudicator"):
        note = claim_withheld(request) or await _claim_note(services, who, grading_id)
    confirmed = saved if saved and _SAVED.fullmatch(saved) else None
    before = was if was in VERDICT_LABELS else None
    return await render_grading_page(
        services, who, grading_id, claim_note=note, saved=confirmed, was=before
    )


def refused_claim_note(refusal: Conflict) -> str:
    """What a page says of a claim refused: the grading a promoted regrade replaced (whose
    review is the one in force's), or someone else holding the item."""
    if isinstance(refusal, Superseded):
        return f"Not claimed: {refusal}."
    return f"Being reviewed by someone else: {refusal}"


async def _claim_note(services: Services, who: SignedIn, grading_id: str) -> str:
    """Claim the item for ``who`` (a finished one stays finished): what the page says of it.
    A grading a promoted regrade replaced is not claimed: the queue holds the one in force."""
    try:
        claimed = await claim_review(services, who.principal, grading_id, reopen=False)
    except Conflict as exc:
        return refused_claim_note(exc)
    if claimed.done_at is not None:
        return "This grading's review is finished: it is not in the queue."
    return f"You are reviewing this grading ({who.principal.name})."


def _override_request(form: dict[str, str]) -> OverrideCreate:
    kind = form.get("kind", "answer")
    body: dict[str, Any] = {"reason": form.get("reason", "").strip()}
    if kind == "verdict":
        body["verdict"] = form.get("verdict") or None
    else:
        body["question_id"] = form.get("question_id") or None
        body["answer"] = form.get("answer") or None
    return OverrideCreate.model_validate(body)


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"]) or "form"
    return f"{where}: {first['msg']}"


@post(
    "/gradings/{grading_id:str}/overrides",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def override_from_page(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect | Template:
    """Append one override at the revision the page showed; on a stale revision the page
    again with what changed meanwhile and the form as it was sent. The same form sent
    twice (a double click) is saved once: the second finds its override the only one
    added since the page (its ``seen``) and is answered as saved. On a grading a
    promoted regrade superseded: the page again (409) saying so, linking the grading
    that replaced it."""
    try:
        request = _override_request(data)
        revision = int(data.get("revision", ""))
    except (ValidationError, ValueError) as exc:
        error = _problem(exc) if isinstance(exc, ValidationError) else "revision: not a number"
        return await render_grading_page(
            services, who, grading_id, status_code=422, pending=data, error=error
        )
    # the overrides the page showed (none sent: a form that predates the field)
    listed = data.get("seen")
    seen = None if listed is None else {s for s in listed.split(",") if s}
    try:
        await append_override(
            services, who.principal, grading_id, request, expected_revision=revision, seen=seen
        )
    except Superseded as exc:  # no use sending it again: it goes on the grading in force
        return await render_grading_page(
            services, who, grading_id, status_code=409, pending=data, error=f"Not saved: {exc}"
        )
    except PreconditionFailed:
        return await render_grading_page(
            services,
            who,
            grading_id,
            status_code=409,
            pending=data,
            stale=(revision, seen or set()),
        )
    # back at the card just overridden, which says it was saved and how the verdict moved
    params = {"saved": request.question_id or "verdict"}
    if data.get("shown") in VERDICT_LABELS:
        params["was"] = data["shown"]
    params.update(carried_walk(data))  # the queue walk
    anchor = f"#q-{request.question_id}" if request.question_id else "#verdict"
    return Redirect(f"/gradings/{grading_id}?{urlencode(params)}{anchor}", status_code=303)


@get("/gradings", guards=[web_require("submitter")], include_in_schema=False)
async def grading_list(
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    agent: FromQuery[str | None] = None,
    model: FromQuery[str | None] = None,
    scenario_id: FromQuery[str | None] = None,
    status: FromQuery[Literal["pending", "graded", "unscored", ""] | None] = None,
    held: FromQuery[Literal["true", "false", ""] | None] = None,
    judge: FromQuery[str | None] = None,
    rubric: FromQuery[str | None] = None,
    q: FromQuery[str | None] = None,
    cursor: FromQuery[str | None] = None,
) -> Template:
    """Gradings, newest first: a submitter's own, everyone's for adjudicators. ``judge``
    (``model`` or ``backend:model``) and ``rubric`` (``id`` or ``id@version``) take the
    reports' labels, so a chart links to the gradings behind it. ``q`` searches the
    diagnoses, override reasons and tag notes (the syntax of ``GET /v1/gradings``); a
    malformed one answers 422 with the form and what is wrong."""
    principal = who.principal
    rubric_id, _, version = (rubric or "").partition("@")
    shown = {
        "q": q,
        "agent": agent,
        "model": model,
        "scenario_id": scenario_id,
        "status": status,
        "held": held or None,
        "judge": judge,
        "rubric": rubric,
    }
    try:
        search = parse_search(q)
    except InvalidSearch as exc:
        return page(
            "gradings.html",
            who,
            status_code=422,
            items=[],
            next_cursor=None,
            filters=shown,
            search_error=str(exc),
            next_query="",
        )
    filters = GradingFilter(
        agent=agent or None,
        model=model or None,
        scenario_id=scenario_id or None,
        status=status or None,
        held={"true": True, "false": False}.get(held or ""),
        judge=judge or None,
        rubric_id=rubric_id or None,
        rubric_version=version or None,
        search=search,
    )
    items, next_cursor = await readable_gradings(
        services, principal, filters, cursor=cursor, limit=50
    )
    return page(
        "gradings.html",
        who,
        items=[(g, verdict_label(g)) for g in items],
        next_cursor=next_cursor,
        filters=shown,
        searching=search is not None,
        next_query=urlencode({**{k: v for k, v in shown.items() if v}, "cursor": next_cursor}),
    )
