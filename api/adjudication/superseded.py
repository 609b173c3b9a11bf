"""Human corrections go on the grading in force, never on one a promote superseded.

A promoted regrade replaces the submission's current grading and carries the overrides
and failure tags in force on it at that moment; the verdict in force, the reports and
``?tag=`` read the current grading from then on. An override or tag added to (or a tag
removed from) the grading replaced afterwards would reach none of them, so it is
refused (409) naming the grading to amend instead. Withdrawing an override stays
allowed there: it withdraws the copies a promote carried as well.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from storage.errors import Superseded
from storage.tables import GradingRecord

__all__ = ["refuse_superseded"]


def refuse_superseded(session: Session, grading: GradingRecord, *, instead: str) -> None:
    """Superseded (409) when a promoted regrade replaced ``grading`` (its
    ``superseded_by`` is set; a shadow regrade's grading, never current, has none):
    the message names the grading that superseded it and, when later promotes replaced
    that one too, the grading in force, followed by ``instead`` (what to do there, as
    ``"override that one"``)."""
    if grading.superseded_by is None:
        return
    successor = grading.superseded_by
    in_force, seen = successor, {grading.id}
    while in_force not in seen:
        seen.add(in_force)
        later = session.get(GradingRecord, in_force)
        if later is None or later.superseded_by is None:
            break
        in_force = later.superseded_by
    where = f"grading {successor}"
    if in_force != successor:
        where += f", itself superseded: grading {in_force} is in force"
    raise Superseded(
        f"grading {grading.id} is superseded by {where} (a promoted regrade): {instead}",
        grading_id=grading.id,
        in_force=in_force,
    )
