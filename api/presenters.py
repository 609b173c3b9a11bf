"""Turning stored gradings into the public grading object."""

from __future__ import annotations

from api.auth import Principal
from api.schemas import AnswerPublic, DimensionPublic, GradingPublic, SubmissionPublic
from judge.rubric import Rubric
from storage import GradingView
from storage.tables import SubmissionRecord

__all__ = ["can_read", "can_see_ground_truth", "grading_public"]


def can_read(principal: Principal, submission: SubmissionRecord) -> bool:
    """Owners, adjudicators and admins read a grading."""
    return principal.at_least("adjudicator") or submission.submitted_by == principal.id


def can_see_ground_truth(principal: Principal, submission: SubmissionRecord) -> bool:
    """A submitter sees a ground truth only if it sent it itself."""
    if principal.at_least("adjudicator"):
        return True
    return submission.ground_truth_source == "inline" and submission.submitted_by == principal.id


def _dimensions(view: GradingView, rubric: Rubric | None) -> list[DimensionPublic]:
    names = {d.id: d.name for d in rubric.dimensions} if rubric else {}
    counts: dict[str, list[int]] = {}
    for answer in view.answers:
        yes_total = counts.setdefault(answer.dimension_id, [0, 0])
        yes_total[0] += int(answer.answer)
        yes_total[1] += 1
    return [
        DimensionPublic(id=dim, name=names.get(dim, dim), yes=yes, total=total)
        for dim, (yes, total) in counts.items()
    ]


def grading_public(
    view: GradingView, *, rubric: Rubric | None, principal: Principal
) -> GradingPublic:
    """The grading object as ``principal`` may see it."""
    g, s = view.grading, view.submission
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
                answer="yes" if a.answer else "no",
                judge_answer="yes" if a.judge_answer else "no",
                reasoning=a.reasoning,
                evidence=a.evidence,
                evidence_verified=a.evidence_verified,
                confidence=a.confidence,
                overridden=False,
            )
            for a in view.answers
        ],
        dimensions=_dimensions(view, rubric),
        yes_count=g.yes_count,
        composite=g.composite,
        passed=g.passed,
        judge_passed=g.judge_passed,
        decisive=g.decisive,
        needs_review=g.needs_review,
        review_reasons=list(g.review_reasons or []),
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
