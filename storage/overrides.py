"""Overrides as every feature reads them: as domain events, and applied to a grading.

An override is a new row pointing at the override it supersedes; nothing of the
judge's is updated. The grading row keeps the effective figures (yes_count,
composite, passed) for filtering and reporting, recomputed by the rule from the
judge's answers and the overrides in force (:func:`apply_in_force`): the adjudication
feature appends overrides, a regrade carries them to the new grading.
"""

from __future__ import annotations

from collections.abc import Sequence

from judge.adjudication import (
    OverrideEvent,
    Target,
    effective_outcome,
)
from judge.review_reasons import holds_pass
from judge.rubric import Rubric
from storage.review_tables import OverrideRecord
from storage.tables import GradingRecord

__all__ = ["apply_in_force", "override_events"]


def override_events(records: Sequence[OverrideRecord]) -> list[OverrideEvent]:
    """Stored overrides as domain events, oldest first."""
    ordered = sorted(records, key=lambda r: (r.created_at, r.id))
    return [
        OverrideEvent(
            id=r.id,
            kind=r.kind,  # type: ignore[arg-type]
            question_id=r.question_id,
            answer=r.answer,
            verdict=r.verdict,  # type: ignore[arg-type]
            withdraws=r.withdraws,
        )
        for r in ordered
    ]


def apply_in_force(
    grading: GradingRecord,
    rubric: Rubric | None,
    answers: dict[str, bool],
    in_force: dict[Target, OverrideEvent],
) -> None:
    """Set the grading's effective figures from its answers and the overrides in force.

    With an answer to every question of the rubric the rule is recomputed on the
    effective answers; without (an unscored grading, or an imported checklist that left
    questions out) the rule cannot be applied: a verdict override decides ``passed``, or
    else the judge's own verdict stands (none for an unscored grading). A pass of a
    diagnosis flagged for injection stays held (``passed`` None) until a verdict override
    is in force.
    """
    verdict = in_force.get(("verdict", ""))
    if rubric is not None and answers and all(q.id in answers for q in rubric.questions):
        outcome = effective_outcome(rubric, answers, in_force)
        grading.yes_count = outcome.rule.yes_count
        grading.composite = outcome.rule.composite
        grading.decisive = outcome.rule.decisive
        # a pass held for injection markers is released by a human verdict only
        grading.held = bool(
            outcome.passed and verdict is None and holds_pass(grading.review_reasons)
        )
        grading.passed = None if grading.held else outcome.passed
        grading.overridden = outcome.overridden
    else:
        # the judge's own pass is held as the rule's would be (injection markers)
        grading.held = bool(
            grading.judge_passed and verdict is None and holds_pass(grading.review_reasons)
        )
        if verdict is not None:
            grading.passed = verdict.verdict == "pass"
        else:
            grading.passed = None if grading.held else grading.judge_passed
        grading.overridden = verdict is not None
