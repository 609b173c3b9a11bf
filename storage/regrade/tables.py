"""Tables of batch regrading: regrade jobs and the judge cache.

A regrade job's items are gradings (``grading.regrade_job_id``), graded by the usual
workers; the job row holds what was asked (filter, rubric, judge, mode), the dry-run
estimate and the job's state. The judge cache keeps completions of deterministic judge
requests (temperature 0) under the SHA-256 of the canonical request (``judge.cache``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, String, Text
from sqlmodel import Field, SQLModel

from storage.tables import _created, _json, _when, empty_dict, new_id

__all__ = ["JOB_STATES", "TERMINAL_STATES", "JudgeCacheRecord", "RegradeJobRecord"]

#: every state of a regrade job
JOB_STATES = ("queued", "running", "paused", "done", "failed", "cancelled")
#: states a job does not leave by itself (``cancelled`` can be resumed by a person)
TERMINAL_STATES = ("done", "failed", "cancelled")


class RegradeJobRecord(SQLModel, table=True):
    """A batch regrade: which submissions, which rubric and judge, shadow or promote."""

    __tablename__ = "regrade_job"

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    #: queued | running | paused | done | failed | cancelled
    state: str = Field(default="queued", sa_type=String(16))
    #: a dry run stores its estimate and grades nothing
    dry_run: bool = False
    #: the filter as given (agent, model, scenario_id, created range, ...)
    filter: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column("filter", JSON, nullable=False)
    )
    #: the rubric every item is graded with; None for a job that names none, whose items
    #: each keep their submission's (``api.regrade.job_queries.RegradeTarget.item_rubric``)
    rubric_id: str | None = Field(default=None, sa_type=String(64))
    rubric_version: str | None = Field(default=None, sa_type=String(64))
    judge_spec: str = Field(sa_type=String(512))
    #: shadow | promote
    mode: str = Field(sa_type=String(16))
    #: as_submitted (each submission's own version) | latest (each scenario's newest)
    ground_truth: str = Field(default="as_submitted", sa_type=String(16))
    #: items created (matching submissions)
    total: int = 0
    #: final counts, written when the job ends (done, failed, judge_calls, cache_hits)
    counts: dict[str, Any] = _json(dict)
    #: judge calls, cache hits and tokens expected, computed before anything is spent
    estimate: dict[str, Any] = _json(dict)
    created_by: str = Field(sa_type=String(64))
    created_at: datetime = _created()
    started_at: datetime | None = _when()
    finished_at: datetime | None = _when()
    error: str | None = Field(default=None, sa_type=Text)
    #: seconds spent paused or cancelled since it started (left out of its rate)
    rested_seconds: float = 0.0
    #: when its current pause or cancellation began (None while it runs)
    rested_since: datetime | None = _when()


class JudgeCacheRecord(SQLModel, table=True):
    """A completion of a deterministic judge request, reused for identical requests.

    Entries made before judge calls carried their cache key (migration ``0025``): read,
    no longer written (``storage.judge_cache``)."""

    __tablename__ = "judge_cache"

    #: SHA-256 of the canonical request and judge identity (``judge.cache.cache_key``)
    key: str = Field(primary_key=True, sa_type=String(64))
    backend: str = Field(sa_type=String(32))
    model: str = Field(sa_type=String(256))
    completion_text: str = Field(sa_type=Text)
    response_model: str = Field(sa_type=String(256))
    fingerprint: str | None = Field(default=None, sa_type=String(256))
    response_format: str | None = Field(default=None, sa_type=String(32))
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    created_at: datetime = _created()
