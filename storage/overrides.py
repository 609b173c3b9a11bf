"""Overrides as every feature reads them: as domain events, and applied to a grading.

An override is a new row pointing at the override it supersedes; nothing of the
judge's is updated. The grading row keeps the effective figures (yes_count,
composite, passed) for filtering and reporting, recomputed by the rule from the
judge's answers and the overrides in force (:func:`apply_in_force`): the adjudication
feature appends overrides, a regrade carries them to the new grading. A verdict
imported from another judge (SREGym's) was never the rule's: with no override in force
it reads as imported again (:func:`imported_figures`, the import's own figures, with
the composite SREGym wrote, kept in the submission's ``metadata.sregym``), and while
one is in force the rule decides it but holds nothing for its screening's reasons.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import object_session

from judge.adjudication import (
    OverrideEvent,
    Target,
    effective_outcome,
)
from judge.review_reasons import holds_pass
from judge.rubric import Rubric
from judge.rule import apply_rule
from storage.imports import SREGYM_JUDGE_SPEC
from storage.review_tables import OverrideRecord
from storage.tables import GradingRecord, SubmissionRecord

__all__ = ["ImportedFigures", "apply_in_force", "imported_figures", "override_events"]


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


@dataclass(frozen=True, slots=True)
class ImportedFigures:
    """A graded imported verdict's figures, as the import stores them."""

    yes_count: int
    composite: float | None
    decisive: bool | None
    passed: bool | None


def _answers_every_question(rubric: Rubric, answers: Mapping[str, bool]) -> bool:
    """Whether the rule can be applied: an answer to every question of ``rubric``."""
    return bool(answers) and all(q.id in answers for q in rubric.questions)


def imported_figures(
    rubric: Rubric,
    said: Mapping[str, bool],
    *,
    success: bool | None,
    composite: float | None,
) -> ImportedFigures:
    """The figures of a checklist imported with the verdict another judge gave it
    (SREGym's): its yes count; that judge's ``success`` and ``composite`` where it gave
    them, else the rule's where the checklist answers every question of ``rubric`` (none
    where it does not); the rule's ``decisive`` there. The import stores them
    (``api.imports.rows``), and they are the grading's again once no override of it is
    in force (:func:`apply_in_force`)."""
    outcome = apply_rule(rubric, said) if _answers_every_question(rubric, said) else None
    if composite is None and outcome is not None:
        composite = outcome.composite
    if success is None and outcome is not None:
        success = outcome.passed
    return ImportedFigures(
        yes_count=sum(said.values()),
        composite=composite,
        decisive=outcome.decisive if outcome else None,
        passed=success,
    )


def _figure(value: Any) -> float | None:
    """A figure SREGym wrote (a CSV cell, as the import keeps it) as a finite number; None
    for a blank or non-numeric cell (``nan``, ``None``)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _imported_composite(grading: GradingRecord) -> float | None:
    """The composite SREGym wrote for ``grading``'s attempt (``Diagnosis.composite_score``,
    kept in its submission's ``metadata.sregym``), read in the transaction ``grading``
    belongs to; None where it wrote none (or ``grading`` belongs to none)."""
    session = object_session(grading)
    if session is None:
        return None
    submission = session.get(SubmissionRecord, grading.submission_id)
    sregym = (submission.metadata_ or {}).get("sregym") if submission is not None else None
    return _figure(sregym.get("composite_score")) if isinstance(sregym, dict) else None


def _as_imported(grading: GradingRecord, rubric: Rubric | None, answers: dict[str, bool]) -> None:
    """An imported verdict with no override in force, as imported: its judge's own
    verdict, held by nothing (the screening's review reasons only put it in the queue),
    and, where the rule recomputed its figures while an override was in force (a
    checklist that answers every question), the import's figures of its answers again:
    SREGym's own composite where it wrote one (:func:`_imported_composite`), else the
    rule's, as the import took it (:func:`imported_figures`)."""
    grading.passed = grading.judge_passed
    grading.held = False
    grading.overridden = False
    if rubric is not None and _answers_every_question(rubric, answers):
        figures = imported_figures(
            rubric,
            answers,
            success=grading.judge_passed,
            composite=_imported_composite(grading),
        )
        grading.yes_count = figures.yes_count
        grading.composite = figures.composite
        grading.decisive = figures.decisive


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
    is in force. An imported SREGym verdict takes the rule only while an override is in
    force, and is never held (the screening of an import holds nothing): with no
    override in force, it is SREGym's verdict as imported.
    """
    imported = grading.judge_spec == SREGYM_JUDGE_SPEC
    if imported and not in_force:
        _as_imported(grading, rubric, answers)
        return
    verdict = in_force.get(("verdict", ""))
    # a pass held for injection markers is released by a human verdict only; an imported
    # verdict's screening puts it in the review queue and holds nothing
    holds = verdict is None and not imported and holds_pass(grading.review_reasons)
    if rubric is not None and _answers_every_question(rubric, answers):
        outcome = effective_outcome(rubric, answers, in_force)
        grading.yes_count = outcome.rule.yes_count
        grading.composite = outcome.rule.composite
        grading.decisive = outcome.rule.decisive
        grading.held = bool(outcome.passed and holds)
        grading.passed = None if grading.held else outcome.passed
        grading.overridden = outcome.overridden
    else:
        # the judge's own pass is held as the rule's would be (injection markers)
        grading.held = bool(grading.judge_passed and holds)
        if verdict is not None:
            grading.passed = verdict.verdict == "pass"
        else:
            grading.passed = None if grading.held else grading.judge_passed
        grading.overridden = verdict is not None
