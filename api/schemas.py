"""API input and output models, apart from the table models of ``storage``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, model_validator

__all__ = [
    "AnswerPublic",
    "DimensionPublic",
    "GradingPage",
    "GradingPublic",
    "ScenarioCreate",
    "ScenarioPublic",
    "SubmissionCreate",
    "SubmissionPublic",
]

_NAME = Field(default=None, max_length=200)


class SubmissionCreate(BaseModel):
    """A diagnosis to grade, with exactly one of ``scenario_id`` and ``ground_truth``."""

    model_config = ConfigDict(extra="forbid")

    diagnosis: StrictStr
    scenario_id: StrictStr | None = Field(default=None, max_length=128)
    ground_truth: StrictStr | None = None
    agent: StrictStr | None = _NAME
    model: StrictStr | None = _NAME
    run_id: StrictStr | None = _NAME
    attempt: StrictInt | None = Field(default=None, ge=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    rubric: StrictStr | None = Field(default=None, max_length=64, description="rubric id")

    @model_validator(mode="after")
    def _exactly_one_truth(self) -> SubmissionCreate:
        if (self.scenario_id is None) == (self.ground_truth is None):
            raise ValueError("give exactly one of scenario_id and ground_truth")
        return self


class ScenarioCreate(BaseModel):
    """A scenario whose ground truth agents never see."""

    model_config = ConfigDict(extra="forbid")

    id: StrictStr = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
    ground_truth: StrictStr = Field(description="empty for a healthy-cluster control scenario")
    title: StrictStr | None = Field(default=None, max_length=300)
    tags: list[StrictStr] = Field(default_factory=list, max_length=50)


class ScenarioPublic(BaseModel):
    """A registered scenario."""

    id: str
    ground_truth: str
    title: str | None
    tags: list[str]
    created_at: datetime


class AnswerPublic(BaseModel):
    """One question's effective answer beside the judge's."""

    question_id: str
    dimension_id: str
    answer: Literal["yes", "no"]
    judge_answer: Literal["yes", "no"]
    reasoning: str
    evidence: str
    evidence_verified: bool | None
    confidence: float | None
    overridden: bool


class DimensionPublic(BaseModel):
    """Yes answers of one dimension."""

    id: str
    name: str
    yes: int
    total: int


class SubmissionPublic(BaseModel):
    """What was submitted; the ground truth only for those allowed to see it."""

    id: str
    agent: str | None
    model: str | None
    scenario_id: str | None
    run_id: str | None
    attempt: int | None
    metadata: dict[str, Any]
    diagnosis: str
    ground_truth: str | None
    created_at: datetime


class GradingPublic(BaseModel):
    """The grading object of CONTRACT.md."""

    id: str
    submission_id: str
    status: Literal["pending", "graded", "unscored"]
    unscored_reason: str | None
    pending_reason: str | None
    detail: str | None
    rubric: dict[str, str]
    judge: dict[str, str]
    answers: list[AnswerPublic]
    dimensions: list[DimensionPublic]
    yes_count: int | None
    composite: float | None
    passed: bool | None
    judge_passed: bool | None
    decisive: bool | None
    needs_review: bool
    review_reasons: list[str]
    revision: int
    created_at: datetime
    graded_at: datetime | None
    submission: SubmissionPublic


class GradingPage(BaseModel):
    """One page of gradings; pass ``next_cursor`` as ``cursor`` for the next."""

    items: list[GradingPublic]
    next_cursor: str | None
