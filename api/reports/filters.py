"""The pieces report queries are built from: filters, group columns, verdict columns.

Nothing here touches the database; :mod:`api.reports.queries` runs the queries.

Groups are named ``agent``, ``model``, ``scenario``, ``rubric``, ``judge`` and
``source`` (where the ground truth came from: ``scenario`` or ``inline``). A
rubric group is labelled ``id@version`` and a judge group ``backend:model``, and the
``rubric`` and ``judge`` filters accept either the short form (``sregym-rca``,
``qwen3:8b``) or the labelled one (``sregym-rca@v1+…``, ``ollama:qwen3:8b``). The
``provisional`` group is ``provisional`` or ``qualified`` (the grading's judge had or
had not qualified); shadow and provisional gradings are scoped in :mod:`api.reports.filter_scope`.
``day`` and ``week`` group by when the grading was made (UTC; a week is labelled by its
Monday, ``YYYY-MM-DD``): a pass rate over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, String, and_, case, func, or_, select
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.functions import FunctionElement
from sqlmodel import col

from api.reports.filter_scope import (
    Include,
    Inline,
    Provisional,
    covered,
    inline_where,
    provisional_label,
    provisional_where,
)
from judge.masking import mask_passwords
from storage.gradings import judge_labelled, where_equal
from storage.tables import AnswerRecord, GradingRecord, ScenarioRecord, SubmissionRecord

__all__ = [
    "GROUP_KEYS",
    "GroundTruthSource",
    "GroupKey",
    "ReportFilter",
    "Verdicts",
    "answer_column",
    "count_where",
    "failing_dimensions_query",
    "filtered",
    "group_columns",
    "group_key",
    "joined",
    "scored_answers",
    "verdict_column",
]

GroupKey = Literal[
    "agent", "model", "scenario", "rubric", "judge", "judge_digest", "source", "provisional",
    "day", "week",
]  # fmt: skip
GROUP_KEYS: tuple[GroupKey, ...] = (
    "agent", "model", "scenario", "rubric", "judge", "judge_digest", "source", "provisional",
    "day", "week",
)  # fmt: skip
#: where a submission's ground truth came from: a registered scenario, or its sender
GroundTruthSource = Literal["scenario", "inline"]

#: ``effective``: after human overrides (``passed``, ``answer``); ``judge``: the judge's own
Verdicts = Literal["effective", "judge"]

_G, _S, _A = GradingRecord, SubmissionRecord, AnswerRecord


class utc_day(FunctionElement[str]):
    """The UTC calendar day of a timestamp as ``YYYY-MM-DD``, the same text on SQLite and
    PostgreSQL; with ``week=True`` the Monday that begins its (ISO) week."""

    type = String()
    inherit_cache = True

    def __init__(self, column: Any, *, week: bool = False) -> None:
        self.week = week
        super().__init__(column)


@compiles(utc_day, "sqlite")
def _utc_day_sqlite(element: utc_day, compiler: Any, **kw: Any) -> str:
    # stored as UTC text; 'weekday 0' moves to the next Sunday (or stays), -6 days: Monday
    shift = ", 'weekday 0', '-6 days'" if element.week else ""
    return f"date({compiler.process(element.clauses, **kw)}{shift})"


@compiles(utc_day, "postgresql")
def _utc_day_postgres(element: utc_day, compiler: Any, **kw: Any) -> str:
    stamp = f"({compiler.process(element.clauses, **kw)} AT TIME ZONE 'UTC')"
    if element.week:
        stamp = f"date_trunc('week', {stamp})"
    return f"to_char({stamp}, 'YYYY-MM-DD')"


#: the columns of each group and how their values join into one label
_GROUPS: dict[GroupKey, tuple[tuple[Any, ...], str]] = {
    "agent": ((_S.agent,), ""),
    "model": ((_S.model,), ""),
    "scenario": ((_S.scenario_id,), ""),
    "rubric": ((_G.rubric_id, _G.rubric_version), "@"),
    "judge": ((_G.judge_backend, _G.judge_model), ":"),
    # the model behind the judge's name when it graded: a replaced model is another group
    "judge_digest": ((_G.judge_digest,), ""),
    "source": ((_S.ground_truth_source,), ""),
    "provisional": ((provisional_label(),), ""),
    # when the grading was made: a pass rate over time
    "day": ((utc_day(_G.created_at),), ""),
    "week": ((utc_day(_G.created_at, week=True),), ""),
}


@dataclass(frozen=True)
class ReportFilter:
    """Which gradings a report covers; None means "any".

    ``created_after`` is inclusive and ``created_before`` exclusive, on the grading's
    ``created_at``. Only current gradings count unless ``current_only`` is False.
    """

    agent: str | None = None
    model: str | None = None
    scenario_id: str | None = None
    run_id: str | None = None
    #: ``id`` or ``id@version``
    rubric: str | None = None
    #: ``model`` or ``backend:model``
    judge: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    #: only ground truths of registered scenarios, or only those their senders wrote
    ground_truth_source: GroundTruthSource | None = None
    #: only submissions of scenarios in this set (``public``, ``held-out``, ...)
    scenario_set: str | None = None
    #: ``shadow``: also the gradings of shadow regrades (see :mod:`api.reports.filter_scope`)
    include: Include | None = None
    #: ``exclude`` or ``only`` the gradings of judges not yet qualified; None counts them
    provisional: Provisional | None = None
    #: gradings against their submitters' own ground truths: counted ``apart`` (the
    #: reports' default, :func:`api.reports.filter_scope.with_inline_default`) or ``include``d;
    #: None counts every grading
    inline: Inline | None = None
    current_only: bool = True
    #: the gradings a promoted regrade replaced too (an export's ``include_superseded``)
    superseded: bool = False


def submission_filtered(query: Any, filters: ReportFilter) -> Any:
    """``query`` (over submissions) restricted to the filters on submissions: agent,
    model, scenario, run, ground-truth source and scenario set."""
    equal = [
        (_S.agent, filters.agent),
        (_S.model, filters.model),
        (_S.scenario_id, filters.scenario_id),
        (_S.run_id, filters.run_id),
        (_S.ground_truth_source, filters.ground_truth_source),
    ]
    query = where_equal(query, equal)
    if filters.scenario_set is not None:
        members = select(col(ScenarioRecord.id)).where(
            col(ScenarioRecord.scenario_set) == filters.scenario_set
        )
        query = query.where(col(_S.scenario_id).in_(members))
    return query


def filtered(query: Select[Any], filters: ReportFilter) -> Select[Any]:
    """``query`` (over gradings joined to submissions) restricted to ``filters``."""
    query = submission_filtered(query, filters)
    if filters.rubric is not None:
        labelled = col(_G.rubric_id) + "@" + col(_G.rubric_version)
        query = query.where(or_(col(_G.rubric_id) == filters.rubric, labelled == filters.rubric))
    if filters.judge is not None:
        query = query.where(judge_labelled(filters.judge))
    if filters.created_after is not None:
        query = query.where(col(_G.created_at) >= filters.created_after)
    if filters.created_before is not None:
        query = query.where(col(_G.created_at) < filters.created_before)
    for condition in (
        covered(
            current_only=filters.current_only,
            include=filters.include,
            superseded=filters.superseded,
        ),
        provisional_where(filters.provisional),
        inline_where(filters.inline),
    ):
        if condition is not None:
            query = query.where(condition)
    return query


def joined(*columns: Any, from_answers: bool = False) -> Select[Any]:
    """``SELECT columns FROM grading JOIN submission`` (and answers first, if asked)."""
    query = select(*columns)
    if from_answers:
        query = query.select_from(AnswerRecord).join(_G, col(AnswerRecord.grading_id) == col(_G.id))
    else:
        query = query.select_from(_G)
    return query.join(_S, col(_G.submission_id) == col(_S.id))


def group_columns(group_by: Sequence[GroupKey]) -> list[Any]:
    """The labelled columns of the groups, to select and group by."""
    return [
        column.label(f"g_{name}_{i}")
        for name in group_by
        for i, column in enumerate(_GROUPS[name][0])
    ]


def group_key(row: Any, group_by: Sequence[GroupKey]) -> tuple[str | None, ...]:
    """The group labels of a result row, in ``group_by`` order (None for no value); a
    judge's with the credentials of its base URLs masked (a panel's model holds its
    members' specs): the ``judge`` filter reads a panel's members without their URLs."""
    key: list[str | None] = []
    for name in group_by:
        columns, joiner = _GROUPS[name]
        values = [getattr(row, f"g_{name}_{i}") for i in range(len(columns))]
        label = None if values[0] is None else joiner.join(str(v) for v in values)
        key.append(mask_passwords(label) if name == "judge" and label else label)
    return tuple(key)


def verdict_column(verdicts: Verdicts) -> Any:
    """``passed`` (effective) or ``judge_passed``."""
    return col(_G.passed) if verdicts == "effective" else col(_G.judge_passed)


def answer_column(verdicts: Verdicts) -> Any:
    """``answer`` (the judge's after the evidence check) or ``judge_answer``."""
    return col(AnswerRecord.answer) if verdicts == "effective" else col(AnswerRecord.judge_answer)


def count_where(*conditions: ColumnElement[bool]) -> ColumnElement[int]:
    """``SUM(CASE WHEN conditions THEN 1 ELSE 0 END)``, 0 for no rows."""
    return func.coalesce(func.sum(case((and_(*conditions), 1), else_=0)), 0)


def scored_answers(query: Any, filters: ReportFilter, verdicts: Verdicts) -> Any:
    """Answers of graded gradings; for effective figures, those without overrides."""
    query = filtered(query, filters).where(col(_G.status) == "graded")
    if verdicts == "effective":
        query = query.where(col(_G.overridden).is_not(True))
    return query


def failing_dimensions_query(
    filters: ReportFilter, group_by: Sequence[GroupKey], verdicts: Verdicts
) -> Any:
    """Per group and dimension: failing diagnoses, those with no yes, those weakest there."""
    groups = group_columns(group_by)
    answer = answer_column(verdicts)
    per_dimension = (
        scored_answers(
            joined(
                col(_A.grading_id).label("gid"),
                col(_A.dimension_id).label("dim"),
                *groups,
                count_where(answer.is_(True)).label("yes"),
                func.count().label("total"),
                from_answers=True,
            ),
            filters,
            verdicts,
        )
        .where(verdict_column(verdicts).is_(False))
        .group_by(col(_A.grading_id), col(_A.dimension_id), *groups)
        .subquery()
    )
    share = per_dimension.c.yes * 1.0 / per_dimension.c.total
    ranked = select(
        per_dimension,
        share.label("share"),
        func.min(share).over(partition_by=per_dimension.c.gid).label("lowest"),
    ).subquery()
    labels = [ranked.c[g.name] for g in groups]
    return select(
        *labels,
        ranked.c.dim,
        func.count().label("failing"),
        count_where(ranked.c.yes == 0).label("zero_yes"),
        count_where(ranked.c.share == ranked.c.lowest).label("weakest"),
    ).group_by(*labels, ranked.c.dim)
