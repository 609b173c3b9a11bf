"""Effective answers of gradings with human overrides in force, for reports and exports.

The answer rows keep what the judge said (after the evidence check); overrides are
rows of their own. Where a grading has an override in force (``overridden``), its
effective answers are the stored ones with the overrides applied by
:func:`judge.adjudication.overrides_in_force`, as in the grading object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session
from sqlmodel import col

from api.reports.filters import (
    GroupKey,
    ReportFilter,
    filtered,
    group_columns,
    group_key,
    joined,
)
from judge.adjudication import effective_answers, overrides_in_force
from storage.gradings import records_by_grading
from storage.overrides import override_events
from storage.review_tables import OverrideRecord
from storage.tables import AnswerRecord, GradingRecord

__all__ = [
    "EffectiveAnswer",
    "EffectiveGrading",
    "overridden_gradings",
    "overrides_by_grading",
    "record_answers",
]


@dataclass(frozen=True)
class EffectiveAnswer:
    """One question's effective answer."""

    question_id: str
    dimension_id: str
    position: int
    yes: bool


@dataclass(frozen=True)
class EffectiveGrading:
    """A graded grading with an override in force: its group, verdict and answers."""

    key: tuple[str | None, ...]
    grading_id: str
    passed: bool | None
    answers: tuple[EffectiveAnswer, ...]


def record_answers(
    answers: Sequence[AnswerRecord], overrides: Sequence[OverrideRecord]
) -> dict[str, bool]:
    """Question id -> effective answer of stored rows (``judge.adjudication.effective_answers``)."""
    in_force = overrides_in_force(override_events(overrides))
    return effective_answers({a.question_id: a.answer for a in answers}, in_force)


def overrides_by_grading(
    session: Session, grading_ids: Sequence[str]
) -> dict[str, list[OverrideRecord]]:
    """Every override of these gradings, oldest first, by grading id."""
    order = (col(OverrideRecord.created_at), col(OverrideRecord.id))
    return records_by_grading(session, OverrideRecord, grading_ids, order=order)


def overridden_gradings(
    session: Session, filters: ReportFilter, group_by: Sequence[GroupKey]
) -> list[EffectiveGrading]:
    """Graded gradings in ``filters`` with an override in force, with effective answers."""
    query: Any = filtered(
        joined(
            col(GradingRecord.id).label("grading_id"),
            col(GradingRecord.passed).label("passed"),
            *group_columns(group_by),
        ),
        filters,
    ).where(col(GradingRecord.status) == "graded", col(GradingRecord.overridden).is_(True))
    rows = list(session.execute(query))
    ids = [row.grading_id for row in rows]
    order = (col(AnswerRecord.grading_id), col(AnswerRecord.position))
    answers = records_by_grading(session, AnswerRecord, ids, order=order)
    overrides = overrides_by_grading(session, ids)
    gradings = []
    for row in rows:
        stored = answers[row.grading_id]
        effective = record_answers(stored, overrides[row.grading_id])
        gradings.append(
            EffectiveGrading(
                key=group_key(row, group_by),
                grading_id=row.grading_id,
                passed=row.passed,
                answers=tuple(
                    EffectiveAnswer(
                        question_id=a.question_id,
                        dimension_id=a.dimension_id,
                        position=a.position,
                        yes=effective[a.question_id],
                    )
                    for a in stored
                ),
            )
        )
    return gradings
