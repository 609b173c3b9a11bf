"""An imported SREGym attempt's verdict as an export writes it back.

An export writes each kept CSV row back cell for cell, except the
:data:`VERDICT_COLUMNS` of an attempt whose shown grading is not SREGym's own as
imported (a grading by another judge: a promoted regrade; or a human override in force):
there they take that grading's values. The import reads them so: in a row of such an
attempt imported again, those columns may differ from the row kept
(:func:`verdict_rewritten`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.adjudication import overrides_in_force
from storage.imports.tables import SREGYM_JUDGE_SPEC
from storage.overrides import override_events
from storage.review_tables import OverrideRecord
from storage.tables import GradingRecord

__all__ = ["VERDICT_COLUMNS", "as_imported", "verdict_rewritten"]

#: the columns a grading other than SREGym's own rewrites
VERDICT_COLUMNS = (
    "Diagnosis.success",
    "Diagnosis.judgment",
    "Diagnosis.composite_score",
    "Diagnosis.accuracy",
    "Diagnosis.dimensions",
    "Diagnosis.checklist",
    "Diagnosis.reasoning",
)


def verdict_rewritten(session: Session, submission_id: str) -> bool:
    """Does an export write the :data:`VERDICT_COLUMNS` of the attempt imported as
    ``submission_id`` from another grading than SREGym's own as imported? Its current
    grading (the newest, which an export shows) is another judge's, or a human override
    is in force on it. False for an attempt without a grading."""
    g = GradingRecord
    newest = (
        select(g)
        .where(col(g.submission_id) == submission_id, col(g.is_current).is_(True))
        .order_by(col(g.created_at).desc(), col(g.id).desc())
        .limit(1)
    )
    grading = session.execute(newest).scalar()
    if grading is None:
        return False
    if grading.judge_spec != SREGYM_JUDGE_SPEC or grading.overridden:
        return True  # without reading its overrides
    query = select(OverrideRecord).where(col(OverrideRecord.grading_id) == grading.id)
    return not as_imported(grading, list(session.execute(query).scalars()))


def as_imported(grading: GradingRecord, overrides: Sequence[OverrideRecord]) -> bool:
    """Is ``grading`` SREGym's own verdict as imported: SREGym's judge's, with no human
    override in force (``overrides``: its override records)? Overrides change it only
    while one is in force: withdrawn, it is SREGym's again."""
    return (
        grading.judge_spec == SREGYM_JUDGE_SPEC
        and not grading.overridden
        and not overrides_in_force(override_events(overrides))
    )
