"""Which gradings a report covers beyond the current ones: shadow gradings, provisional ones.

A **shadow grading** is the grading a regrade job in ``shadow`` mode made beside the
current one: it never becomes current, so reports over current gradings never see it.
``include="shadow"`` adds them. Per submission, rubric and judge only the newest one
counts, and none where a current grading by the same rubric and judge exists, so that a
shadow regrade run twice, or one that repeats the current judge, is not counted twice.
Items of a cancelled job (status ``cancelled``) never count.

A **provisional grading** was made by a judge that had not qualified on a calibration
run. ``provisional="exclude"`` leaves them out, ``"only"`` keeps only them; the default
counts them and the reports say how many there were.

An **inline grading** graded a diagnosis against a ground truth its own submitter sent
(``ground_truth_source`` ``inline``): self-graded, so not comparable with gradings of
registered scenarios. Reports count them apart by default (``inline="apart"``: an
``inline`` count beside ``held``, outside ``n``, and left out of the other figures);
``inline="include"`` mixes them in. Asking for them (``ground_truth_source=inline``, or
grouping by ``source``) mixes them in too (:func:`with_inline_default`). Without a
report's default (``inline`` None: exports, regrade filters) every grading counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import and_, case, exists, or_, select
from sqlalchemy.orm import aliased
from sqlmodel import col

from storage.regrade.tables import RegradeJobRecord
from storage.tables import RESULT_STATUSES, GradingRecord, SubmissionRecord

if TYPE_CHECKING:
    from api.reports.filters import ReportFilter

__all__ = [
    "INCLUDE_CHOICES",
    "INLINE_CHOICES",
    "PROVISIONAL_CHOICES",
    "Include",
    "Inline",
    "Provisional",
    "covered",
    "inline_where",
    "is_inline",
    "provisional_label",
    "provisional_where",
    "with_inline_default",
]

#: gradings a report may add to the current ones
Include = Literal["shadow"]
INCLUDE_CHOICES: tuple[Include, ...] = ("shadow",)
#: what a report does with provisional gradings (None: count them, and say so)
Provisional = Literal["include", "exclude", "only"]
PROVISIONAL_CHOICES: tuple[Provisional, ...] = ("include", "exclude", "only")
#: what a report does with gradings against their submitters' own ground truths
Inline = Literal["apart", "include"]
INLINE_CHOICES: tuple[Inline, ...] = ("apart", "include")

_G = GradingRecord


def _shadow_jobs() -> Any:
    return select(col(RegradeJobRecord.id)).where(col(RegradeJobRecord.mode) == "shadow")


def _is_shadow(grading: Any) -> Any:
    return and_(
        col(grading.regrade_job_id).in_(_shadow_jobs()),
        col(grading.is_current).is_(False),
        col(grading.status) != "cancelled",
    )


def _shadow() -> Any:
    """A submission's shadow grading of its kind (rubric version and judge) in scope: none
    when a current grading is of that kind, else its newest finished one, else (none
    finished yet) its newest pending one. A second regrade still running or paused never
    hides what the first one finished; it shows as pending only where nothing finished."""
    other = aliased(GradingRecord)
    newer = or_(
        col(other.created_at) > col(_G.created_at),
        and_(col(other.created_at) == col(_G.created_at), col(other.id) > col(_G.id)),
    )
    other_done = col(other.status).in_(RESULT_STATUSES)
    this_pending = col(_G.status).not_in(RESULT_STATUSES)
    hidden = exists().where(
        col(other.submission_id) == col(_G.submission_id),
        col(other.rubric_id) == col(_G.rubric_id),
        col(other.rubric_version) == col(_G.rubric_version),
        col(other.judge_backend) == col(_G.judge_backend),
        col(other.judge_model) == col(_G.judge_model),
        col(other.id) != col(_G.id),
        or_(
            col(other.is_current).is_(True),
            and_(
                _is_shadow(other),
                or_(
                    and_(other_done, or_(this_pending, newer)),
                    and_(~other_done, this_pending, newer),
                ),
            ),
        ),
    )
    return and_(_is_shadow(_G), ~hidden)


def covered(*, current_only: bool, include: Include | None, superseded: bool = False) -> Any:
    """The WHERE clause of the gradings in scope, or None for every grading
    (``superseded``: the gradings a promoted regrade replaced too, never a shadow one
    unless ``include`` asks for them)."""
    if not current_only:
        return None
    current: Any = col(_G.is_current).is_(True)
    if superseded:
        current = or_(current, col(_G.superseded_by).is_not(None))
    return or_(current, _shadow()) if include == "shadow" else current


def provisional_where(provisional: Provisional | None) -> Any:
    """The WHERE clause for ``provisional``, or None when every grading counts."""
    if provisional == "exclude":
        return col(_G.provisional).is_not(True)
    if provisional == "only":
        return col(_G.provisional).is_(True)
    return None


def provisional_label() -> Any:
    """``provisional`` or ``qualified``: the group label of a grading's judge status."""
    return case((col(_G.provisional).is_(True), "provisional"), else_="qualified")


def is_inline() -> Any:
    """The condition: the submission's ground truth came from its submitter."""
    return col(SubmissionRecord.ground_truth_source) == "inline"


def inline_where(inline: Inline | None) -> Any:
    """The WHERE clause for ``inline``, or None when every grading counts.

    ``apart`` leaves inline gradings out of a query's rows; the pass-rate counts query
    counts them in a column of their own instead (``api.reports.queries``)."""
    if inline == "apart":
        return ~is_inline()
    return None


def with_inline_default(filters: ReportFilter, group_by: Sequence[str] = ()) -> ReportFilter:
    """A report's filter with its default for inline gradings: ``apart`` unless the
    report asks for them (``inline`` set, ``ground_truth_source=inline``, grouped by
    ``source``)."""
    if filters.inline is not None:
        return filters
    asked = filters.ground_truth_source == "inline" or "source" in group_by
    return replace(filters, inline="include" if asked else "apart")
