"""API input and output models of regrade jobs (docs/imports-regrades.md, "Batch regrading")."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from api.regrade.batch_queries import BatchProgress
from api.regrade.selection import RegradeFilter, check_graded_judge, masked_filter
from api.service.request_types import BoundedDatetime
from api.service.settings import mask_passwords
from judge.rubric import named_rubric_ref
from storage.regrade.progress import JobView

__all__ = [
    "BatchResultsPublic",
    "RegradeFilterIn",
    "RegradeJobCreate",
    "RegradeJobPublic",
    "job_public",
]

_NAME = Field(default=None, max_length=256)
#: a scenario tag as scenarios carry them: never empty
_Tag = Annotated[StrictStr, Field(min_length=1)]


class RegradeFilterIn(BaseModel):
    """Which submissions to regrade; every key optional."""

    model_config = ConfigDict(extra="forbid")

    agent: StrictStr | None = _NAME
    model: StrictStr | None = _NAME
    scenario_id: StrictStr | None = Field(default=None, max_length=128)
    created_after: BoundedDatetime | None = None
    created_before: BoundedDatetime | None = None
    rubric_version: StrictStr | None = Field(
        default=None,
        max_length=160,
        description="of the current grading: id@version, id or version",
    )
    judge: StrictStr | None = Field(
        default=None,
        max_length=512,
        description="of the current grading: BACKEND:MODEL[@URL] (e.g. external:sregym) or "
        "a panel, panel:SPEC1,SPEC2 or panel:SPEC1+SPEC2",
    )
    passed: StrictBool | None = None
    tags: list[_Tag] = Field(default_factory=list, max_length=20, description="scenario tags")
    scenario_set: StrictStr | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="only scenarios of this set, e.g. held-out",
    )
    run_id: StrictStr | None = Field(default=None, max_length=256)
    ground_truth_source: Literal["scenario", "inline"] | None = None

    @field_validator("rubric_version")
    @classmethod
    def _rubric_ref(cls, value: str | None) -> str | None:
        """``id@`` (an empty version) and an empty id (``""``, ``@VERSION``) are refused,
        as a job's target rubric refuses them: they name no rubric a grading has."""
        if value is not None:
            named_rubric_ref(value)
        return value

    @field_validator("scenario_set")
    @classmethod
    def _named_set(cls, value: str | None) -> str | None:
        """A blank set is refused: no scenario has one, so it would select nothing."""
        if value is not None and not value.strip():
            raise ValueError("the scenario set is empty (give a set's name, or omit it)")
        return value

    @field_validator("created_before")
    @classmethod
    def _after_the_start(cls, value: datetime | None, info: ValidationInfo) -> datetime | None:
        """A ``created_before`` not later than ``created_after`` is refused: the
        interval (the start inclusive, the end exclusive) holds no submission."""
        start = info.data.get("created_after")
        if value is not None and start is not None and value <= start:
            raise ValueError("created_before is not later than created_after: nothing is between")
        return value

    @field_validator("judge")
    @classmethod
    def _graded_judge(cls, value: str | None) -> str | None:
        """A judge in none of the forms a grading records is refused: it would select
        nothing (``api.regrade.selection.check_graded_judge``)."""
        if value is not None:
            check_graded_judge(value)
        return value

    def to_filter(self) -> RegradeFilter:
        """The storage filter."""
        return RegradeFilter(
            agent=self.agent,
            model=self.model,
            scenario_id=self.scenario_id,
            created_after=self.created_after,
            created_before=self.created_before,
            rubric_version=self.rubric_version,
            judge=self.judge,
            passed=self.passed,
            tags=tuple(self.tags),
            scenario_set=self.scenario_set,
            run_id=self.run_id,
            ground_truth_source=self.ground_truth_source,
        )


class RegradeJobCreate(BaseModel):
    """A regrade job: a filter, a target rubric and/or judge, a mode."""

    model_config = ConfigDict(extra="forbid")

    filter: RegradeFilterIn = Field(default_factory=RegradeFilterIn)
    rubric: StrictStr | None = Field(
        default=None,
        max_length=160,
        description="id or id@version; default: each submission keeps its own (the current "
        "version of the rubric it was graded with)",
    )
    judge: StrictStr | None = Field(
        default=None,
        max_length=512,
        description="BACKEND:MODEL[@URL], or panel:SPEC1,SPEC2; default: the service's",
    )
    mode: Literal["shadow", "promote"] = "shadow"
    ground_truth: Literal["as_submitted", "latest"] = Field(
        default="as_submitted",
        description="as_submitted: each submission's own ground truth; latest: each "
        "registered scenario's newest version (inline ground truths stay as sent)",
    )
    dry_run: StrictBool = False
    engine: Literal["live", "batch", "offline"] = Field(
        default="live",
        description="live: one judge request at a time; batch: the OpenAI Batch API (or a "
        "server with its endpoints); offline: a requests file out "
        "(GET /v1/regrade-jobs/{id}/batch-requests), a results file in "
        "(POST /v1/regrade-jobs/{id}/batch-results)",
    )
    engine_retry: Literal["live", "batch"] = Field(
        default="live",
        description="a batch request that failed, expired or is missing is asked live, or "
        "goes in a new batch (offline: a new requests file) up to 3 rounds, then live",
    )

    @field_validator("rubric")
    @classmethod
    def _target_rubric(cls, value: str | None) -> str | None:
        """A blank id names no rubric: refused, never read as the service's default
        (which only an omitted rubric is); ``id@``, an empty version, is refused too."""
        if value is not None:
            named_rubric_ref(value)
        return value


class RegradeJobPublic(BaseModel):
    """A regrade job with its progress and estimate."""

    id: str
    state: Literal["queued", "running", "paused", "done", "failed", "cancelled"]
    dry_run: bool
    mode: str
    ground_truth: str = "as_submitted"
    filter: dict[str, Any]
    rubric: dict[str, str] | None = Field(
        description="the rubric every item is graded with, {id, version}; null for a job "
        "that names none: each item keeps its submission's (the current version of the "
        "rubric its grading has)"
    )
    judge: str
    total: int
    done: int
    failed: int
    cancelled: int
    remaining: int
    judge_calls: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    #: finished items per second
    rate: float | None
    eta_seconds: float | None
    estimate: dict[str, Any]
    error: str | None
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    #: live | batch | offline
    engine: str = "live"
    #: a batch engine's progress: its state, requests written / submitted / completed /
    #: failed, the replies' tokens, each batch, and a failing step's error, failures in a
    #: row and next try (None for a live job)
    batch: dict[str, Any] | None = None


def job_public(
    view: JobView, *, batch: BatchProgress | None = None, engine: str = "live"
) -> RegradeJobPublic:
    """The public job object (``batch``: its batch engine's progress, if it has one)."""
    job, p = view.job, view.progress
    return RegradeJobPublic(
        engine=batch.engine if batch is not None else engine,
        batch=batch.as_dict() if batch is not None else None,
        id=job.id,
        state=job.state,  # type: ignore[arg-type]
        dry_run=job.dry_run,
        mode=job.mode,
        ground_truth=job.ground_truth,
        # a credential its base URL's query carries is shown masked, pages and API alike,
        # the judge's and that of the graded judge its filter names
        filter=masked_filter(job.filter),
        rubric=(
            None
            if job.rubric_id is None or job.rubric_version is None
            else {"id": job.rubric_id, "version": job.rubric_version}
        ),
        judge=mask_passwords(job.judge_spec),
        total=job.total,
        done=p.done,
        failed=p.failed,
        cancelled=p.cancelled,
        remaining=p.remaining,
        judge_calls=p.judge_calls,
        cache_hits=p.cache_hits,
        prompt_tokens=p.prompt_tokens,
        completion_tokens=p.completion_tokens,
        rate=p.rate,
        eta_seconds=p.eta_seconds,
        estimate=job.estimate,
        error=job.error,
        created_by=job.created_by,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )


class BatchRefusal(BaseModel):
    """A result line not kept, and why."""

    line: int
    custom_id: str
    reason: str


class BatchResultsPublic(BaseModel):
    """What a results file gave: replies kept, failures kept (retried), duplicates (a reply
    kept already: nothing stored), refusals (nothing stored), the engine's state after."""

    batch_id: str | None
    state: str
    answered: int
    failed: int
    duplicates: int
    missing: int
    refused: int
    refusals: list[BatchRefusal]
