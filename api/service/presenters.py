"""Turning stored gradings into the public grading object."""

from __future__ import annotations

from collections.abc import Sequence

from api.service.principal import Principal
from api.service.schemas import (
    AnswerPublic,
    DimensionPublic,
    GradingPublic,
    OverridePublic,
    SubmissionPublic,
    TagPublic,
    VotePublic,
)
from api.service.services import Services
from judge.adjudication import overrides_in_force
from judge.rubric import Rubric
from storage import FailureTagRecord, GradingView, OverrideRecord
from storage.overrides import override_events
from storage.quality_tables import JudgeVoteRecord
from storage.tables import SubmissionRecord

__all__ = [
    "can_read",
    "can_see_ground_truth",
    "grading_public",
    "render_grading",
    "render_gradings",
]


def can_read(principal: Principal, submission: SubmissionRecord) -> bool:
    """Owners, adjudicators and admins read a grading."""
    return principal.at_least("adjudicator") or submission.submitted_by == principal.id


def can_see_ground_truth(principal: Principal, submission: SubmissionRecord) -> bool:
    """A submitter sees a ground truth only if it sent it itself."""
    if principal.at_least("adjudicator"):
        return True
    return submission.ground_truth_source == "inline" and submission.submitted_by == principal.id


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
    )


def grading_public(
    view: GradingView,
    *,
    rubric: Rubric | None,
    principal: Principal,
    overrides: Sequence[OverrideRecord] = (),
    tags: Sequence[FailureTagRecord] = (),
    votes: Sequence[JudgeVoteRecord] = (),
) -> GradingPublic:
    """The grading object as ``principal`` may see it: effective values beside the judge's."""
    g, s = view.grading, view.submission
    in_force = overrides_in_force(override_events(overrides))
    effective = {a.question_id: a.answer for a in view.answers}
    overridden: set[str] = set()
    for (kind, question_id), event in in_force.items():
        if kind == "answer" and question_id in effective and event.answer is not None:
            effective[question_id] = event.answer
            overridden.add(question_id)
    verdict = in_force.get(("verdict", ""))
    return GradingPublic(
        id=g.id,
        submission_id=g.submission_id,
        status=g.status,  # type: ignore[arg-type]
        unscored_reason=g.unscored_reason,
        pending_reason=g.pending_reason,
        detail=g.detail,
        rubric={"id": g.rubric_id, "version": g.rubric_version},
        judge={"backend": g.judge_backend, "model": g.judge_model},
        answers=[
            AnswerPublic(
                question_id=a.question_id,
                dimension_id=a.dimension_id,
                answer="yes" if effective[a.question_id] else "no",
                judge_answer="yes" if a.judge_answer else "no",
                reasoning=a.reasoning,
                evidence=a.evidence,
                evidence_verified=a.evidence_verified,
                confidence=a.confidence,
                overridden=a.question_id in overridden,
                votes=[
                    VotePublic(
                        judge=v.judge_spec,
                        sample=v.sample_index,
                        answer="yes" if v.answer else "no",
                        confidence=v.confidence,
                        call_id=v.call_id,
                    )
                    for v in votes
                    if v.question_id == a.question_id
                ],
            )
            for a in view.answers
        ],
        dimensions=_dimensions(view, rubric, effective),
        yes_count=g.yes_count,
        composite=g.composite,
        passed=g.passed,
        judge_passed=g.judge_passed,
        decisive=g.decisive,
        needs_review=g.needs_review,
        review_reasons=list(g.review_reasons or []),
        provisional=bool(g.provisional),
        verdict_override=verdict.verdict if verdict else None,  # type: ignore[arg-type]
        overridden=bool(g.overridden),
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
        submission=SubmissionPublic(
            id=s.id,
            agent=s.agent,
            model=s.model,
            scenario_id=s.scenario_id,
            run_id=s.run_id,
            attempt=s.attempt,
            metadata=s.metadata_ or {},
            diagnosis=s.diagnosis,
            ground_truth=s.ground_truth if can_see_ground_truth(principal, s) else None,
            created_at=s.created_at,
        ),
    )


async def render_gradings(
    services: Services, views: Sequence[GradingView], principal: Principal
) -> list[GradingPublic]:
    """Grading objects for several stored gradings, with overrides and tags in two queries."""
    ids = [v.grading.id for v in views]
    overrides = await services.store.overrides.for_gradings(ids)
    tags = await services.store.tags.for_gradings(ids)
    votes = await services.store.votes.for_gradings(ids)
    rendered = []
    for view in views:
        g = view.grading
        rubric = await services.rubrics.resolve(g.rubric_id, g.rubric_version)
        rendered.append(
            grading_public(
                view,
                rubric=rubric,
                principal=principal,
                overrides=overrides[g.id],
                tags=tags[g.id],
                votes=votes[g.id],
            )
        )
    return rendered


async def render_grading(
    services: Services, view: GradingView, principal: Principal
) -> GradingPublic:
    """The grading object of one stored grading."""
    return (await render_gradings(services, [view], principal))[0]
