"""Who may see what of a grading: owners and adjudicators read it; a ground truth, and
anything derived from it (what a judge or a human wrote with it in view, which answers
a code check vetoed), only reaches those allowed to see the ground truth."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from pydantic import BaseModel

from api.service.principal import Principal
from api.service.schemas import (
    AnswerPublic,
    DimensionPublic,
    GradingPublic,
    GradingRead,
    SubmissionPublic,
    SubmitterAnswer,
    SubmitterGradingAnswers,
    SubmitterGradingVerdict,
    SubmitterSubmission,
    SubmitterView,
)
from judge.spec import judge_identity, model_identity
from storage import GradingView, NotFound
from storage.tables import SubmissionRecord

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from api.service.services import Services

__all__ = [
    "can_read",
    "can_see_ground_truth",
    "grading_etag",
    "hide_judge_addresses",
    "readable_grading",
    "readable_in",
    "submitter_grading",
]


def can_read(principal: Principal, submission: SubmissionRecord) -> bool:
    """Owners, adjudicators and admins read a grading."""
    return principal.at_least("adjudicator") or submission.submitted_by == principal.id


async def readable_grading(
    services: Services, principal: Principal, grading_id: str
) -> GradingView:
    """The grading if it exists and ``principal`` may read it, else :class:`NotFound`."""
    return await services.store.db.run_read(readable_in, services, principal, grading_id)


def readable_in(
    session: Session, services: Services, principal: Principal, grading_id: str
) -> GradingView:
    """``readable_grading`` inside a use case's ``session``."""
    view = services.store.gradings.read_one(session, grading_id)
    if view is None or not can_read(principal, view.submission):
        raise NotFound(f"no grading with id {grading_id!r}")
    return view


def can_see_ground_truth(principal: Principal, submission: SubmissionRecord) -> bool:
    """A submitter sees a ground truth only if it sent it itself."""
    if principal.at_least("adjudicator"):
        return True
    return submission.ground_truth_source == "inline" and submission.submitted_by == principal.id


def _left_out(view: type[BaseModel]) -> list[str]:
    """The fields of the full grading object (dotted within answers and the submission)
    that ``view`` does not declare."""
    nested: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
        "answers": (AnswerPublic, SubmitterAnswer),
        "submission": (SubmissionPublic, SubmitterSubmission),
    }
    left = []
    for name in GradingPublic.model_fields:
        if name not in view.model_fields:
            left.append(name)
        elif name in nested:
            full, shown = nested[name]
            left += [f"{name}.{f}" for f in full.model_fields if f not in shown.model_fields]
    return left


def submitter_grading(public: GradingPublic, view: SubmitterView) -> SubmitterGradingVerdict:
    """The grading as a submitter sees it that may not see its ground truth.

    A whitelist: exactly the fields the submitter views declare
    (:class:`SubmitterGradingVerdict`, :class:`SubmitterGradingAnswers`) are copied,
    so nothing the full object holds or gains later reaches a submitter unless it is
    added there. Never included: the judge's own answers and verdict, evidence,
    reasoning, confidence, votes, code vetoes and flags, ``detail``, review reasons,
    overrides and tags, the ground truth's hash and version.
    """
    model = SubmitterGradingVerdict if view == "verdict" else SubmitterGradingAnswers
    submission = SubmitterSubmission(
        **{name: getattr(public.submission, name) for name in SubmitterSubmission.model_fields}
    )
    verdict = {
        name: getattr(public, name)
        for name in SubmitterGradingVerdict.model_fields
        if name not in ("view", "submission", "withheld", "rubric", "judge")
    }
    # the nested objects key by key too: whatever they gain stays out
    # the grading's revision counts overrides and tags, which this view never shows: the
    # view's says only whether the result is in (its ETag moves with what it shows)
    verdict["revision"] = 1 if public.status == "pending" else 2
    verdict["rubric"] = {k: public.rubric[k] for k in ("id", "version") if k in public.rubric}
    verdict["judge"] = {k: public.judge[k] for k in ("backend", "model") if k in public.judge}
    withheld = _left_out(model)
    if view == "verdict":
        return SubmitterGradingVerdict(**verdict, submission=submission, withheld=withheld)
    return SubmitterGradingAnswers(
        **verdict,
        submission=submission,
        withheld=withheld,
        answers=[
            SubmitterAnswer(question_id=a.question_id, dimension_id=a.dimension_id, answer=a.answer)
            for a in public.answers
        ],
        dimensions=[
            DimensionPublic(id=d.id, name=d.name, yes=d.yes, total=d.total)
            for d in public.dimensions
        ],
        yes_count=public.yes_count,
        composite=public.composite,
    )


def grading_etag(body: GradingRead, principal: Principal) -> str:
    """The ETag of a grading as one reader sees it: the whole object's, as an adjudicator
    or admin reads it, is its revision (what ``If-Match`` names); whatever a submitter
    reads (its view, or the whole object with the judges' addresses hidden) is a digest
    of it, so it moves when what it shows moves, never with an override or a tag it does
    not show, and two different bodies never share one ETag."""
    if isinstance(body, SubmitterGradingVerdict) or not principal.at_least("adjudicator"):
        digest = hashlib.sha256(body.model_dump_json().encode()).hexdigest()[:20]
        return f'"v{digest}"'
    return f'"{body.revision}"'


#: a URL in a text the service wrote (a judge spec's ``@BASE_URL``, an HTTP error's),
#: without the punctuation that follows it in a sentence
_ADDRESS = re.compile(r"(@?)https?://[^\s'\"<>]*[^\s'\"<>:;,.)\]]")


def _without_addresses(text: str | None) -> str | None:
    """``text`` with every URL left out (``spec@URL`` as ``spec``, a bare URL as
    ``<judge address>``)."""
    if text is None or "://" not in text:
        return text
    return _ADDRESS.sub(lambda m: "" if m.group(1) else "<judge address>", text)


def hide_judge_addresses(public: GradingPublic) -> GradingPublic:
    """The grading object with its votes' judges as ``backend:model`` and no URL in its
    ``detail`` (a confirming judge's spec, a judge's connection error): where a judge
    runs (an internal URL) is for adjudicators and admins."""
    judge = public.judge
    return public.model_copy(
        update={
            "judge": {**judge, "model": model_identity(judge["backend"], judge["model"])},
            "detail": _without_addresses(public.detail),
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
