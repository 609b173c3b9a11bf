"""Turning stored gradings into the public grading object.

Every judge spec the object names (a vote's judge, a panel's members in the judge's
model, a confirming judge or a refused spec quoted in ``detail``) is shown with the
credentials of its base URL masked (:mod:`judge.masking`): its host, port and path stay
for adjudicators and admins, who need to know where a judge runs. The records keep the
specs as written, since a spec is the identity gradings are bound to and filtered by.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from api.service.errors import NotPermitted
from api.service.principal import Principal
from api.service.schemas import (
    AnswerPublic,
    DimensionPublic,
    GradingCore,
    GradingPublic,
    GradingRead,
    OverridePublic,
    SubmissionPublic,
    SubmitterView,
    TagPublic,
    VetoPublic,
    VotePublic,
)
from api.service.services import Services
from api.service.visibility import (
    can_see_ground_truth,
    hide_judge_addresses,
    readable_in,
    submitter_grading,
)
from judge.adjudication import answer_overrides, overrides_in_force
from judge.evidence import QUOTE_PROBLEMS
from judge.grounding import noted_failures
from judge.masking import mask_passwords
from judge.rubric import Rubric
from judge.trace import TraceCheck, TraceText, trace_check
from judge.verdict import Answer, GradingResult, Vote
from storage import FailureTagRecord, GradingFilter, GradingView, OverrideRecord
from storage.gradings import overrides_of, tags_of
from storage.overrides import override_events
from storage.tables import AnswerRecord, SubmissionRecord

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = [
    "grading_public",
    "present_gradings",
    "read_grading",
    "readable_gradings",
    "render_grading",
    "render_gradings",
    "result_public",
    "rubric_shown",
    "stand_in_rubric",
]


def _dimensions(
    view: GradingView, rubric: Rubric | None, effective: dict[str, bool]
) -> list[DimensionPublic]:
    names = {d.id: d.name for d in rubric.dimensions} if rubric else {}
    counts: dict[str, list[int]] = {}
    for answer in view.answers:
        yes_total = counts.setdefault(answer.dimension_id, [0, 0])
        yes_total[0] += int(effective[answer.question_id])
        yes_total[1] += 1
    return [
        DimensionPublic(id=dim, name=names.get(dim, dim), yes=yes, total=total)
        for dim, (yes, total) in counts.items()
    ]


def _override_public(record: OverrideRecord) -> OverridePublic:
    return OverridePublic(
        id=record.id,
        kind=record.kind,  # type: ignore[arg-type]
        question_id=record.question_id,
        answer=None if record.answer is None else ("yes" if record.answer else "no"),
        verdict=record.verdict,  # type: ignore[arg-type]
        withdraws=record.withdraws,
        supersedes=record.supersedes,
        reason=record.reason,
        author=record.author_name,
        created_at=record.created_at,
        carried_from=record.carried_from,
    )


def _yes_no(value: bool) -> Literal["yes", "no"]:
    return "yes" if value else "no"


def _judge_public(backend: str, model: str) -> dict[str, str]:
    """The judge a grading names: a panel's model holds its members' specs, shown with
    the credentials of their base URLs masked."""
    return {"backend": backend, "model": mask_passwords(model)}


def _detail_public(detail: str | None) -> str | None:
    """A grading's ``detail`` with the credentials of every URL in it masked (a judge
    spec refused or confirming, a judge's connection error)."""
    return None if detail is None else mask_passwords(detail)


def _votes_public(votes: Sequence[Vote], question_id: str) -> list[VotePublic]:
    """The votes of a grading made in this process on one question (no call ids yet)."""
    return [
        VotePublic(
            judge=mask_passwords(vote.judge_spec),
            sample=vote.sample_index,
            answer=_yes_no(vote.answer),
            confidence=vote.confidence,
            call_id=None,
        )
        for vote in votes
        if vote.question_id == question_id
    ]


def _stored_votes_public(votes: Sequence[dict[str, Any]], question_id: str) -> list[VotePublic]:
    """The stored votes on one question (a grading's ``votes``), each naming its judge call."""
    return [
        VotePublic(
            judge=mask_passwords(vote["judge_spec"]),
            sample=vote["sample_index"],
            answer=_yes_no(vote["answer"]),
            confidence=vote["confidence"],
            call_id=vote["call_id"],
        )
        for vote in votes
        if vote["question_id"] == question_id
    ]


def _quote_problem(a: Answer | AnswerRecord) -> str:
    """The quote check's outcome of an unverified quote; for an answer stored before the
    outcome was recorded, ``empty`` or ``not_found``."""
    return a.evidence_check or ("not_found" if a.evidence.strip() else "empty")


def _evidence_reason(a: Answer | AnswerRecord) -> str | None:
    """Why the quote does not back a yes, where it was checked and not found."""
    return None if a.evidence_verified is not False else QUOTE_PROBLEMS[_quote_problem(a)]


def _veto_public(a: Answer | AnswerRecord) -> VetoPublic | None:
    veto = a.veto
    if veto is None:
        return None
    return VetoPublic.model_validate(veto if isinstance(veto, dict) else veto.model_dump())


def _recorded_veto(
    a: AnswerRecord, rubric: Rubric | None, noted: dict[str, tuple[str, str]]
) -> VetoPublic | None:
    """The veto of an answer stored before answers carried one: from the grounding notes
    of the grading's ``detail``, else from its unverified quote."""
    question = (
        next((q for q in rubric.questions if q.id == a.question_id), None) if rubric else None
    )
    if a.question_id in noted:
        effect, failure = noted[a.question_id]
        kind = question.grounding if question and question.grounding else None
        check = f"grounding.{kind}" if kind else "grounding"
        return VetoPublic(check=check, effect=effect, reason=failure)  # type: ignore[arg-type]
    needed = question is None or question.requires_quote
    if a.judge_answer and a.evidence_verified is False and needed:
        check = _quote_problem(a)
        reason = f"{QUOTE_PROBLEMS[check]}: a yes to this question needs a quote from it"
        return VetoPublic(
            check=f"evidence.{check}", effect="flagged" if a.answer else "vetoed", reason=reason
        )
    return None


def _answer_public(
    a: Answer | AnswerRecord,
    *,
    answer: bool,
    overridden: bool = False,
    votes: list[VotePublic],
    grounding: str | None = None,
    veto: VetoPublic | None = None,
    trace_check: TraceCheck | None = None,
) -> AnswerPublic:
    return AnswerPublic(
        question_id=a.question_id,
        dimension_id=a.dimension_id,
        answer=_yes_no(answer),
        judge_answer=_yes_no(a.judge_answer),
        reasoning=a.reasoning,
        evidence=a.evidence,
        evidence_verified=a.evidence_verified,
        evidence_reason=_evidence_reason(a),
        confidence=a.confidence,
        overridden=overridden,
        votes=votes,
        grounding=grounding,
        veto=veto or _veto_public(a),
        trace_check=trace_check,
    )


def result_public(result: GradingResult) -> GradingCore:
    """The grading object of a grading made in this process and not stored (no ids)."""
    outcome, judge_outcome = result.outcome, result.judge_outcome
    return GradingCore(
        status=result.status,
        unscored_reason=result.unscored_reason,
        detail=_detail_public(result.detail),
        rubric={"id": result.rubric_id, "version": result.rubric_version},
        judge=_judge_public(result.judge_backend, result.judge_model),
        answers=[
            _answer_public(
                a,
                answer=a.answer,
                votes=_votes_public(result.votes, a.question_id),
                grounding=a.grounding,
            )
            for a in result.answers
        ],
        dimensions=[
            DimensionPublic(id=d.id, name=d.name, yes=d.yes, total=d.total)
            for d in (outcome.dimensions if outcome else ())
        ],
        yes_count=outcome.yes_count if outcome else None,
        composite=outcome.composite if outcome else None,
        passed=result.passed,
        held=result.held,
        judge_passed=judge_outcome.passed if judge_outcome else None,
        decisive=outcome.decisive if outcome else None,
        needs_review=result.needs_review,
        review_reasons=list(result.review_reasons),
    )


def _submission_public(s: SubmissionRecord, principal: Principal) -> SubmissionPublic:
    visible = can_see_ground_truth(principal, s)
    return SubmissionPublic(
        id=s.id,
        agent=s.agent,
        model=s.model,
        scenario_id=s.scenario_id,
        run_id=s.run_id,
        attempt=s.attempt,
        metadata=s.metadata_ or {},
        diagnosis=s.diagnosis,
        ground_truth=s.ground_truth if visible else None,
        ground_truth_source=s.ground_truth_source,  # type: ignore[arg-type]
        ground_truth_sha256=s.ground_truth_sha256 if visible else None,
        scenario_version=s.scenario_version if visible else None,
        submitted_by=s.submitted_by,
        created_at=s.created_at,
        trace=s.trace,
    )


def grading_public(
    view: GradingView,
    *,
    rubric: Rubric | None,
    principal: Principal,
    overrides: Sequence[OverrideRecord] = (),
    tags: Sequence[FailureTagRecord] = (),
    submitter_view: SubmitterView = "verdict",
) -> GradingRead:
    """The grading object as ``principal`` may see it: effective values beside the judge's.

    A submitter that did not send the ground truth itself gets ``submitter_view`` of it
    (``SRE_JUDGE_SUBMITTER_VIEW``: the verdict, or the verdict and the effective
    answers; :func:`~api.service.visibility.submitter_grading`), nothing else.
    """
    s = view.submission
    public = _grading_public(
        view,
        _submission_public(s, principal),
        rubric=rubric,
        overrides=overrides,
        tags=tags,
    )
    if principal.at_least("adjudicator"):
        return public
    public = hide_judge_addresses(public)
    if can_see_ground_truth(principal, s):
        return public
    return submitter_grading(public, submitter_view)


def _grading_public(
    view: GradingView,
    submission: SubmissionPublic,
    *,
    rubric: Rubric | None,
    overrides: Sequence[OverrideRecord],
    tags: Sequence[FailureTagRecord],
) -> GradingPublic:
    g = view.grading
    in_force = overrides_in_force(override_events(overrides))
    judged = {a.question_id: a.answer for a in view.answers}
    overridden = answer_overrides(judged, in_force)
    effective = {**judged, **overridden}
    verdict = in_force.get(("verdict", ""))
    noted = noted_failures(g.detail)
    # computed in code from the stored trace on every read: it changes no answer
    trace = None if view.submission.trace is None else TraceText(view.submission.trace)
    return GradingPublic(
        id=g.id,
        submission_id=g.submission_id,
        status=g.status,  # type: ignore[arg-type]
        unscored_reason=g.unscored_reason,
        pending_reason=g.pending_reason,
        detail=_detail_public(g.detail),
        rubric={"id": g.rubric_id, "version": g.rubric_version},
        judge=_judge_public(g.judge_backend, g.judge_model),
        answers=[
            _answer_public(
                a,
                answer=effective[a.question_id],
                overridden=a.question_id in overridden,
                votes=_stored_votes_public(g.votes or (), a.question_id),
                veto=None if a.veto else _recorded_veto(a, rubric, noted),
                trace_check=trace_check(a.evidence, trace),
            )
            for a in view.answers
        ],
        dimensions=_dimensions(view, rubric, effective),
        yes_count=g.yes_count,
        composite=g.composite,
        passed=g.passed,
        held=bool(g.held),
        judge_passed=g.judge_passed,
        decisive=g.decisive,
        needs_review=g.needs_review,
        review_reasons=list(g.review_reasons or []),
        provisional=bool(g.provisional),
        verdict_override=verdict.verdict if verdict else None,
        overridden=bool(g.overridden),
        scenario_version=g.scenario_version,
        is_current=g.is_current,
        superseded_by=g.superseded_by,
        regrade_job_id=g.regrade_job_id,
        overrides=[_override_public(o) for o in overrides],
        tags=[
            TagPublic(
                id=t.id or 0, tag=t.tag, note=t.note, author=t.author_name, created_at=t.created_at
            )
            for t in tags
        ],
        revision=g.revision,
        created_at=g.created_at,
        graded_at=g.graded_at,
        submission=submission,
    )


def stand_in_rubric(current: Rubric | None, answered: Iterable[str]) -> Rubric | None:
    """For a grading whose own rubric version no stored version names (SREGym's imported
    verdicts): ``current``, the current version of the same rubric (the rubric file's, as
    ``RubricCatalog.current`` holds it, never the version stored last: a file rolled back
    to an earlier wording is read with that wording), when it asks every question the
    grading answers (``answered``: all of them; some, where SREGym's checklist left
    questions out; none, where SREGym's judge could not grade the attempt); else None.
    The one rule of the grading object, of every export of it
    (``api.reports.export_reads.rubrics_in_scope``) and of the overrides a regrade
    carries off it (``storage.regrade.carry``)."""
    if current is not None and set(answered) <= {q.id for q in current.questions}:
        return current
    return None


def rubric_shown(session: Session, services: Services, view: GradingView) -> Rubric | None:
    """The rubric a grading is shown with: its own version, or, for one no stored version
    names, the current version of the same rubric as :func:`stand_in_rubric` allows, so
    its answers read with their texts and dimensions and a human can decide them (a
    verdict override, blind labels). The rule is recomputed only on a grading that
    answers all its questions (``storage.overrides.apply_in_force``)."""
    g = view.grading
    rubric = services.rubrics.resolve_in(session, g.rubric_id, g.rubric_version)
    if rubric is not None:
        return rubric
    current = services.rubrics.current.get(g.rubric_id)
    return stand_in_rubric(current, (a.question_id for a in view.answers))


def present_gradings(
    session: Session, services: Services, views: Sequence[GradingView], principal: Principal
) -> list[GradingRead]:
    """Grading objects for several stored gradings, read in ``session``: their overrides
    and tags in one query each (the votes are on the grading rows)."""
    ids = [v.grading.id for v in views]
    overrides = overrides_of(session, ids)
    tags = tags_of(session, ids)
    rendered = []
    for view in views:
        g = view.grading
        rubric = rubric_shown(session, services, view)
        rendered.append(
            grading_public(
                view,
                rubric=rubric,
                principal=principal,
                overrides=overrides[g.id],
                tags=tags[g.id],
                submitter_view=services.settings.submitter_view,
            )
        )
    return rendered


def full_grading(grading: GradingRead) -> GradingPublic:
    """``grading`` as the full object: what only adjudicators reach (overrides, labels,
    the grading's page in the workbench) is shown the full object, never a submitter's
    view; anything else is refused (``NotPermitted``), never shown in part."""
    if not isinstance(grading, GradingPublic):
        raise NotPermitted("only adjudicators see the whole grading")
    return grading


async def render_gradings(
    services: Services,
    views: Sequence[GradingView],
    principal: Principal,
) -> list[GradingRead]:
    """``present_gradings`` in a snapshot of its own."""
    return await services.store.db.run_read(present_gradings, services, views, principal)


async def render_grading(
    services: Services,
    view: GradingView,
    principal: Principal,
) -> GradingRead:
    """The grading object of one stored grading."""
    return (await render_gradings(services, [view], principal))[0]


async def read_grading(services: Services, principal: Principal, grading_id: str) -> GradingRead:
    """The grading object of one grading ``principal`` may read (else NotFound), its
    parts read in one snapshot, in one worker-thread hop."""
    return await services.store.db.run_read(_grading_object, services, principal, grading_id)


def _grading_object(
    session: Session, services: Services, principal: Principal, grading_id: str
) -> GradingRead:
    view = readable_in(session, services, principal, grading_id)
    return present_gradings(session, services, [view], principal)[0]


async def readable_gradings(
    services: Services,
    principal: Principal,
    filters: GradingFilter,
    *,
    cursor: str | None,
    limit: int,
) -> tuple[list[GradingRead], str | None]:
    """A page of the gradings ``principal`` may read (submitters their own, adjudicators
    and admins all), newest first, presented, read in one snapshot; and the next cursor."""
    submitted_by = None if principal.at_least("adjudicator") else principal.id
    return await services.store.db.run_read(
        _readable_page, services, principal, filters, cursor, limit, submitted_by
    )


def _readable_page(
    session: Session,
    services: Services,
    principal: Principal,
    filters: GradingFilter,
    cursor: str | None,
    limit: int,
    submitted_by: str | None,
) -> tuple[list[GradingRead], str | None]:
    views, next_cursor = services.store.gradings.read_page(
        session, filters=filters, after=cursor, limit=limit, submitted_by=submitted_by
    )
    return present_gradings(session, services, views, principal), next_cursor
