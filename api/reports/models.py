"""The report objects of the API and the command line: every rate with its n and interval."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from pydantic import BaseModel

from api.reports.filters import GroupKey, ReportFilter, Verdicts
from judge.statistics import ArmDifference, Interval, Proportion, ScenarioDifference

__all__ = [
    "ARM_FIELDS",
    "Arm",
    "ComparisonReport",
    "DimensionRate",
    "DimensionReport",
    "GroupRate",
    "PassRateReport",
    "QuestionRate",
    "QuestionReport",
    "TagRate",
    "TagReport",
]


#: The fields an arm of a comparison may filter on (the report filter's but which
#: gradings of a submission count: ``current_only`` and ``superseded``).
ARM_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(ReportFilter) if f.name not in ("current_only", "superseded")
)


class GroupRate(BaseModel):
    """Pass rate of one group: ``n`` = passed + failed; unscored, pending, held apart."""

    key: dict[str, str | None]
    n: int
    passed: int
    failed: int
    unscored: int
    pending: int
    #: passes held for a human (an injection signal, or a judge not yet qualified)
    held: int = 0
    #: of ``total``, gradings by a judge not yet qualified on a calibration run
    provisional: int = 0
    #: gradings against their submitters' own ground truths, counted apart (outside
    #: ``n`` and ``total``) unless the report was asked to mix them in (``inline=include``)
    inline: int = 0
    total: int
    pass_rate: float | None
    interval: Interval


class PassRateReport(BaseModel):
    """Pass rates overall and per group."""

    verdicts: Verdicts
    group_by: list[GroupKey]
    filters: dict[str, Any]
    overall: GroupRate
    groups: list[GroupRate]
    #: what the report covers, in words: filter, verdicts, judge, gradings, provisional
    scope: list[str] = []


class Arm(BaseModel):
    """One arm of a comparison: its filter, outcome and how its scenarios were attempted."""

    filters: dict[str, Any]
    outcome: GroupRate
    scenarios: int
    max_attempts_per_scenario: int
    without_scenario: int
    #: what the arm covers, in words: filter, judge, gradings, provisional
    scope: list[str] = []


class ComparisonReport(BaseModel):
    """Arm a minus arm b, attempts as the unit, and scenarios as the unit when needed."""

    verdicts: Verdicts
    a: Arm
    b: Arm
    difference: ArmDifference
    by_scenario: ScenarioDifference | None
    note: str | None
    #: what ``verdicts`` means, in words
    definitions: str = ""


class QuestionRate(BaseModel):
    """How often one question was answered yes."""

    key: dict[str, str | None]
    question_id: str
    dimension_id: str
    n: int
    yes: int
    yes_rate: float | None
    interval: Interval


class QuestionReport(BaseModel):
    """Yes rates per question."""

    verdicts: Verdicts
    group_by: list[GroupKey]
    filters: dict[str, Any]
    questions: list[QuestionRate]
    #: gradings behind the answers made by a judge not yet qualified
    provisional: int = 0
    scope: list[str] = []


class DimensionRate(BaseModel):
    """Among ``failing`` failed diagnoses: this dimension had no yes, or the fewest."""

    key: dict[str, str | None]
    dimension_id: str
    failing: int
    zero_yes: Proportion
    weakest: Proportion


class DimensionReport(BaseModel):
    """How often each dimension is the one that fails a diagnosis."""

    verdicts: Verdicts
    group_by: list[GroupKey]
    filters: dict[str, Any]
    dimensions: list[DimensionRate]
    #: gradings in the filter made by a judge not yet qualified
    provisional: int = 0
    scope: list[str] = []


class TagRate(BaseModel):
    """Scored gradings carrying a failure tag, of ``n`` scored gradings."""

    key: dict[str, str | None]
    tag: str
    tagged: int
    n: int
    rate: float | None
    interval: Interval


class TagReport(BaseModel):
    """Failure-tag counts."""

    group_by: list[GroupKey]
    filters: dict[str, Any]
    tags: list[TagRate]
    #: gradings in the filter made by a judge not yet qualified
    provisional: int = 0
    scope: list[str] = []
