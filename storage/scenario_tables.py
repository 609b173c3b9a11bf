"""The versions of a scenario's ground truth.

A scenario's row holds its newest ground truth and that version's number; every
version (the first included) is also kept whole here, never changed, so a grading
made against version 2 can be explained after version 3 fixed a typo. Submissions and
gradings name the version they were graded against (``scenario_version``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import String, Text
from sqlmodel import Field, SQLModel

from storage.tables import _created

__all__ = ["DEFAULT_SCENARIO_SET", "ScenarioVersionRecord"]

#: the set of a scenario registered without one
DEFAULT_SCENARIO_SET = "default"


class ScenarioVersionRecord(SQLModel, table=True):
    """One version of a scenario's ground truth, kept whole."""

    __tablename__ = "scenario_version"

    scenario_id: str = Field(primary_key=True, sa_type=String(128), foreign_key="scenario.id")
    #: 1 for the ground truth the scenario was registered with, then 2, 3, ...
    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    ground_truth: str = Field(default="", sa_type=Text)
    #: why this version was made (e.g. "typo in the namespace"); empty for the first
    note: str = Field(default="", sa_type=String(500))
    created_by: str = Field(sa_type=String(64))
    created_at: datetime = _created()
