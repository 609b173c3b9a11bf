"""Tables of judge quality: calibration runs, drift canary runs (the votes of samples and
panels are on their gradings: ``storage.tables.GradingRecord.votes``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, Index, String
from sqlmodel import Field, SQLModel

from storage.tables import _created, empty_dict, empty_list, new_id

__all__ = ["CalibrationRunRecord", "CanaryRunRecord"]


class CalibrationRunRecord(SQLModel, table=True):
    """A judge graded against a labelled gold set, and whether it qualified."""

    __tablename__ = "calibration_run"

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    #: judge spec without the base URL, plus its settings, identify what was qualified
    judge_spec: str = Field(sa_type=String(512), index=True)
    judge_settings: dict[str, Any] = Field(default_factory=empty_dict, sa_type=JSON, nullable=False)
    rubric_id: str = Field(sa_type=String(64))
    rubric_version: str = Field(sa_type=String(64))
    asking_mode: str = Field(default="single", sa_type=String(16))
    #: the model digest measured (``judge.identity``); None: the judge reported none
    judge_digest: str | None = Field(default=None, sa_type=String(256))
    gold_name: str = Field(sa_type=String(256))
    gold_sha256: str = Field(sa_type=String(64), index=True)
    n: int = 0
    verdict_kappa: float | None = Field(default=None, sa_type=Float)
    false_pass_rate: float | None = Field(default=None, sa_type=Float)
    qualified: bool = False
    #: every figure of the run: per question, per dimension, per verdict
    results: dict[str, Any] = Field(default_factory=empty_dict, sa_type=JSON, nullable=False)
    created_by: str = Field(default="cli", sa_type=String(64))
    created_at: datetime = _created()


class CanaryRunRecord(SQLModel, table=True):
    """One run of the drift canary for one judge."""

    __tablename__ = "canary_run"
    __table_args__ = (Index("ix_canary_run_judge_spec_created_at", "judge_spec", "created_at"),)

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    #: the judge's name without its address, as calibration runs name it
    judge_spec: str = Field(sa_type=String(512))
    judge_digest: str | None = Field(default=None, sa_type=String(256))
    rubric_version: str = Field(sa_type=String(64))
    asking_mode: str = Field(default="single", sa_type=String(16))
    set_name: str = Field(sa_type=String(256))
    set_sha256: str = Field(sa_type=String(64))
    #: the calibration run compared with (None: the judge was never calibrated)
    calibration_run_id: str | None = Field(default=None, sa_type=String(32))
    n: int = 0
    scored: int = 0
    judge_calls: int = 0
    budget: int = 0
    verdict_accuracy: float | None = Field(default=None, sa_type=Float)
    verdict_kappa: float | None = Field(default=None, sa_type=Float)
    #: share of the answers that differ from the baseline run's (None: no baseline)
    changed_share: float | None = Field(default=None, sa_type=Float)
    demoted: bool = False
    #: why it demoted the judge, in words
    reasons: list[str] = Field(default_factory=empty_list, sa_type=JSON, nullable=False)
    #: agreement rows (``judge.agreement``) as JSON
    figures: dict[str, Any] = Field(default_factory=empty_dict, sa_type=JSON, nullable=False)
    #: item key -> question id (and ``verdict``) -> the judge's answer
    answers: dict[str, Any] = Field(default_factory=empty_dict, sa_type=JSON, nullable=False)
    created_by: str = Field(default="canary", sa_type=String(64))
    created_at: datetime = _created()
