"""API input and output models of scenarios, their versions and bulk loads."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, field_validator

from storage.scenarios import (
    SCENARIO_ID_MAX_LENGTH,
    SCENARIO_ID_PATTERN,
    ScenarioSpec,
    scenario_id_problem,
)

__all__ = [
    "SCENARIO_ID_PATTERN",
    "ScenarioCreate",
    "ScenarioLoadItem",
    "ScenarioLoadReport",
    "ScenarioPage",
    "ScenarioPublic",
    "ScenarioUpdate",
    "ScenarioVersionList",
    "ScenarioVersionPublic",
]

_SET = Field(
    default=None,
    min_length=1,
    max_length=64,
    pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
    description="the scenario set, e.g. public or held-out (default: default)",
)


#: one tag of a scenario: a short label (a tag a page shows, a filter matches whole)
Tag = Annotated[StrictStr, Field(min_length=1, max_length=64)]


class ScenarioUpdate(BaseModel):
    """A new ground truth (a new version when it differs) and, optionally, new metadata."""

    model_config = ConfigDict(extra="forbid")

    ground_truth: StrictStr = Field(description="empty for a healthy-cluster control scenario")
    title: StrictStr | None = Field(default=None, max_length=256)  # the column's length
    tags: list[Tag] | None = Field(default=None, max_length=50)
    set: StrictStr | None = _SET
    note: StrictStr = Field(
        default="",
        max_length=500,
        description="kept with the version this makes: why the ground truth changed, or "
        "where a new scenario's came from",
    )

    def spec(self, scenario_id: str) -> ScenarioSpec:
        """The storage spec of this change to ``scenario_id``."""
        tags = tuple(self.tags) if self.tags is not None else None
        return ScenarioSpec(scenario_id, self.ground_truth, self.title, tags, self.set, self.note)


class ScenarioCreate(ScenarioUpdate):
    """A scenario whose ground truth agents never see."""

    id: StrictStr = Field(
        min_length=1,
        max_length=SCENARIO_ID_MAX_LENGTH,
        pattern=SCENARIO_ID_PATTERN,
        description="scenario id; may contain `/`; may not start with `inline:` nor end "
        "with `/versions` or `/versions/<n>`",
    )

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        problem = scenario_id_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    def create_spec(self) -> ScenarioSpec:
        """The storage spec of this scenario."""
        return self.spec(self.id)


class ScenarioPublic(BaseModel):
    """A registered scenario; ``ground_truth``, ``version`` and ``revision`` only for
    adjudicators and admins (``withheld`` names what a submitter does not get)."""

    id: str
    set: str
    ground_truth: str | None
    #: the newest version of its ground truth
    version: int | None
    #: every change counted (a new ground truth, title, tag list or set): the ETag an
    #: update's ``If-Match`` names
    revision: int | None = None
    title: str | None
    tags: list[str]
    created_at: datetime
    updated_at: datetime | None = None
    withheld: list[str] = Field(default_factory=list)


class ScenarioPage(BaseModel):
    """One page of scenarios in id order; pass ``next_cursor`` as ``cursor`` for the next."""

    items: list[ScenarioPublic]
    next_cursor: str | None


class ScenarioVersionPublic(BaseModel):
    """One version of a scenario's ground truth."""

    scenario_id: str
    version: int
    ground_truth: str
    note: str
    created_by: str
    created_at: datetime


class ScenarioVersionList(BaseModel):
    """Every version of a scenario's ground truth, oldest first."""

    scenario_id: str
    current_version: int
    items: list[ScenarioVersionPublic]


class ScenarioLoadItem(BaseModel):
    """What loading one scenario did."""

    id: str
    outcome: Literal["created", "unchanged", "new_version", "updated"]
    version: int
    #: the scenario's revision after it (its ETag)
    revision: int
    #: fields written in place (title, tags, set) for ``updated``
    changed: list[str] = Field(default_factory=list)


class ScenarioLoadReport(BaseModel):
    """What a bulk load did, item by item, in the order given, and the counts."""

    items: list[ScenarioLoadItem]
    counts: dict[str, int]
