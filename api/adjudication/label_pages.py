"""Blind labelling: the ground truth, the diagnosis and the nine questions, without the
judge's answers; once saved, the judge's answers and verdict beside yours with
disagreements marked, on a page of its own the form's POST leads to (303), so a refresh
reads the labels saved and sends nothing again. A held pass takes no labels (a verdict
override decides it), nor does a grading without a result (pending, or an item of a
cancelled regrade job) or one a promoted regrade superseded: the page says why and
offers no form (:class:`~api.adjudication.grading_pages.PageOffers`). The walk through the queue
(``q.``) goes along from the form to the result."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, cast
from urllib.parse import urlencode

from litestar import Request, get, post
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromPath
from litestar.response import Redirect, Template

from api.adjudication.grading_pages import page_offers, refused_claim_note
from api.adjudication.grading_view import grading_page_context, verdict_label
from api.adjudication.queue_pages import carried_walk, claim_withheld
from api.adjudication.use_cases import (
    claim_review,
    graded_truth_shown,
    label_grading,
    own_blind_labels,
)
from api.service.presenters import full_grading, render_grading, rubric_shown
from api.service.schemas import GradingPublic
from api.service.services import Services
from api.service.visibility import readable_grading
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from storage.errors import Conflict, InvalidReview

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from judge.rubric import Rubric
    from storage import GradingView

__all__ = ["label_form", "label_saved", "label_submit"]


def _shown(
    session: Session, services: Services, view: GradingView, grading: GradingPublic
) -> tuple[Rubric | None, str | None]:
    """The rubric whose questions the form asks (those ``label_grading`` takes, with their
    texts) and the ground truth the grading is judged against, in one snapshot."""
    return rubric_shown(session, services, view), graded_truth_shown(session, view, grading)


async def _blind_context(services: Services, who: SignedIn, grading_id: str) -> dict[str, Any]:
    view = await readable_grading(services, who.principal, grading_id)
    grading = full_grading(await render_grading(services, view, who.principal))
    rubric, graded = await services.store.db.run_read(_shown, services, view, grading)
    context = grading_page_context(grading, rubric, graded)
    # blind: nothing the judge said, so the diagnosis is shown without its evidence marks
    return {
        "g": grading,
        "hold_reason": context["hold_reason"],
        "truth": context["truth"],
        "diagnosis_text": grading.submission.diagnosis,
        "questions": context["questions"],
        "offers": page_offers(who.principal, grading),
    }


@get(
    "/gradings/{grading_id:str}/label", guards=[web_require("adjudicator")], include_in_schema=False
)
async def label_form(
    request: Request[Any, Any, Any],
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
) -> Template:
    """The blind form; opening it claims the item (a finished one stays finished), unless
    a page of another origin opened it (:func:`claim_withheld`: shown, not claimed). A
    held pass gets no form: a notice that it is held for a human verdict, and a link to
    the grading page's verdict override."""
    note = claim_withheld(request)
    if not note:
        try:
            await claim_review(services, who.principal, grading_id, reopen=False)
        except Conflict as exc:
            note = refused_claim_note(exc)
    context = await _blind_context(services, who, grading_id)
    walk = carried_walk(request.query_params)
    return page("label.html", who, claim_note=note, walk=walk, sent={}, **context)


def _label_path(grading_id: str, walk: dict[str, str], *, saved: bool = False) -> str:
    """The label form of the grading (``saved``: the labels saved), the walk going along."""
    query = f"?{urlencode(walk)}" if walk else ""
    return f"/gradings/{grading_id}/label{'/saved' if saved else ''}{query}"


@post(
    "/gradings/{grading_id:str}/label",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
    status_code=303,
)
async def label_submit(
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect | Template:
    """Store the labels, then on to the page showing them beside the judge's answers
    (303). Refused (the pass became held since the form was shown, or these labels were
    given already): the form again, status 409, with the answers as sent and why they
    were not saved. Sent wrong (an answer other than yes or no, a verdict other than pass,
    fail or none, no answer nor verdict, a question the rubric lacks): the form again,
    status 422, naming the field; nothing is stored and the review stays open."""
    walk = carried_walk(data)
    try:
        answers, verdict = _labels_sent(data)
        await label_grading(services, who.principal, grading_id, answers=answers, verdict=verdict)
    except (InvalidReview, Conflict) as exc:
        status = 422 if isinstance(exc, InvalidReview) else 409
        context = await _blind_context(services, who, grading_id)
        return page(
            "label.html", who, status_code=status, refused=str(exc), walk=walk, sent=data, **context
        )
    return Redirect(_label_path(grading_id, walk, saved=True), status_code=303)


def _labels_sent(data: dict[str, str]) -> tuple[dict[str, bool], Literal["pass", "fail"] | None]:
    """The answers (``q-<question id>``: ``yes`` or ``no``) and the verdict (``pass``,
    ``fail``, or empty for none) the form sent; :class:`InvalidReview` naming the first
    field that holds anything else, so nothing of a form sent wrong is stored."""
    answers: dict[str, bool] = {}
    for key, value in data.items():
        if key.startswith("q-"):
            question_id = key.removeprefix("q-")
            if value not in ("yes", "no"):
                raise InvalidReview(f"{question_id} takes yes or no", field=key)
            answers[question_id] = value == "yes"
    verdict = data.get("verdict") or None
    if verdict not in (None, "pass", "fail"):
        raise InvalidReview("the verdict takes pass, fail or none", field="verdict")
    return answers, cast(Literal["pass", "fail"] | None, verdict)


@get(
    "/gradings/{grading_id:str}/label/saved",
    guards=[web_require("adjudicator")],
    include_in_schema=False,
)
async def label_saved(
    request: Request[Any, Any, Any],
    grading_id: FromPath[str],
    services: NamedDependency[Services],
    who: NamedDependency[SignedIn],
) -> Redirect | Template:
    """The blind labels the signed-in adjudicator saved, beside the judge's answers and
    the judge's own verdict (``judge_passed``), with the disagreements marked and counted
    (a verdict that contradicts the judge's is one); the effective verdict beside them.
    The walk (``q.``) goes along. None saved yet: the label form."""
    walk = carried_walk(request.query_params)
    view, labels = await own_blind_labels(services, who.principal, grading_id)
    if not labels:
        return Redirect(_label_path(grading_id, walk), status_code=303)
    grading = full_grading(await render_grading(services, view, who.principal))
    judged = {a.question_id: a.judge_answer == "yes" for a in grading.answers}
    answers = [(label.question_id, bool(label.answer)) for label in labels if label.question_id]
    rows = [
        (qid, mine, judged.get(qid), judged.get(qid) is not None and judged[qid] != mine)
        for qid, mine in answers
    ]
    my_verdict = next((label.verdict for label in labels if label.verdict), None)
    verdict_row = None
    if my_verdict is not None:
        judge = grading.judge_passed
        verdict_row = (my_verdict, judge, judge is not None and judge != (my_verdict == "pass"))
    differing = [differ for *_, differ in rows] + ([verdict_row[2]] if verdict_row else [])
    return page(
        "label_result.html",
        who,
        g=grading,
        verdict=verdict_label(grading),
        rows=rows,
        verdict_row=verdict_row,
        disagreements=sum(differing),
        my_verdict=my_verdict,
        walk=walk,
    )
