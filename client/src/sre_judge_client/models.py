"""Typed views of the server's JSON: the grading object and what it holds, scenarios
with their ground-truth versions, and import jobs.

Field for field these follow the server's OpenAPI document (``GradingPublic``,
``ScenarioPublic``, ``ImportJobPublic`` and the schemas they refer to); a test in the
server's suite compares them, so the two cannot drift. Unknown fields are kept
(``extra="allow"``), so a newer server never breaks an older client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Answer",
    "Dimension",
    "Grading",
    "GradingPage",
    "ImportJob",
    "ImportRowError",
    "Override",
    "RegradeJob",
    "Scenario",
    "ScenarioLoadItem",
    "ScenarioLoadReport",
    "ScenarioPage",
    "ScenarioVersion",
    "ScenarioVersions",
    "Submission",
    "Tag",
    "Veto",
    "Vote",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class Vote(_Model):
    """One judge's (or one sample's) answer to a question."""

    judge: str
    sample: int
    answer: Literal["yes", "no"]
    confidence: float | None
    call_id: str | None


class Veto(_Model):
    """The check in code that vetoed (the yes counts as no) or flagged (the yes stands, a
    human should look) a judge's yes, and in words what it looked for."""

    #: ``grounding.component``, ``grounding.origin_consistent``, ``grounding.values``,
    #: ``grounding.consistent_values``, ``evidence.empty``, ``evidence.not_found``, ...
    check: str
    effect: Literal["vetoed", "flagged"]
    reason: str


class Answer(_Model):
    """One question's effective answer beside the judge's.

    A submitter reading a grading against a registered scenario gets the effective
    ``answer`` alone (the server's ``answers`` view): the judge's answer, evidence and
    the rest keep their defaults there.
    """

    question_id: str
    dimension_id: str
    answer: Literal["yes", "no"]
    judge_answer: Literal["yes", "no"] | None = None
    reasoning: str = ""
    evidence: str = ""
    evidence_verified: bool | None = None
    #: why the quote does not back a yes, where ``evidence_verified`` is false
    evidence_reason: str | None = None
    confidence: float | None = None
    overridden: bool = False
    votes: list[Vote] = Field(default_factory=list)
    grounding: str | None = None
    #: the check in code that vetoed or flagged the judge's yes, or None
    veto: Veto | None = None
    #: whether the quote appears in the agent's trace: found, not_found, no_trace (the
    #: submission has none), or None where nothing is quoted
    trace_check: Literal["found", "not_found", "no_trace"] | None = None


class Dimension(_Model):
    """Yes answers of one dimension."""

    id: str
    name: str
    yes: int
    total: int


class Submission(_Model):
    """What was submitted; the ground truth only for those allowed to see it."""

    id: str
    agent: str | None
    model: str | None
    scenario_id: str | None
    run_id: str | None
    attempt: int | None
    metadata: dict[str, Any]
    diagnosis: str
    ground_truth: str | None = None
    ground_truth_source: Literal["scenario", "inline"] = "scenario"
    ground_truth_sha256: str | None = None
    #: the scenario's ground-truth version (null when inline or not visible)
    scenario_version: int | None = None
    submitted_by: str | None = None
    created_at: datetime
    #: the agent's trace as sent (credentials redacted): a list of steps or free text
    trace: str | list[dict[str, Any]] | None = None


class Override(_Model):
    """A human correction with its provenance."""

    id: str
    kind: Literal["answer", "verdict", "withdraw"]
    question_id: str | None
    answer: Literal["yes", "no"] | None
    verdict: Literal["pass", "fail"] | None
    withdraws: str | None
    supersedes: str | None
    reason: str
    author: str
    created_at: datetime
    #: the override a regrade copied this one from (None: made by a human on this grading)
    carried_from: str | None = None


class Tag(_Model):
    """A failure tag on a grading."""

    id: int
    tag: str
    note: str
    author: str
    created_at: datetime


class Grading(_Model):
    """The grading object (``GET /v1/gradings/{id}``).

    ``status`` is ``pending``, ``graded``, ``unscored`` (the judge could not answer; see
    ``unscored_reason``) or ``cancelled``. ``passed`` is null while pending, when
    unscored, and when ``held`` (a pass the service holds for a human verdict:
    ``review_reasons`` says why, e.g. ``injection_suspected`` or ``judge_not_qualified``).

    ``view`` says how much of it this token sees: ``full``; or, for a submitter's
    grading against a registered scenario, ``verdict`` (status and verdict: ``answers``
    and ``dimensions`` empty, ``composite`` None) or ``answers`` (also the effective
    answers, dimensions and composite). What a view leaves out keeps its default here
    and is named in ``withheld``.
    """

    id: str
    submission_id: str
    status: Literal["pending", "graded", "unscored", "cancelled"]
    unscored_reason: str | None
    pending_reason: str | None = None
    detail: str | None = None
    rubric: dict[str, str]
    judge: dict[str, str]
    answers: list[Answer] = Field(default_factory=list)
    dimensions: list[Dimension] = Field(default_factory=list)
    yes_count: int | None = None
    composite: float | None = None
    passed: bool | None
    held: bool = False
    judge_passed: bool | None = None
    decisive: bool | None = None
    needs_review: bool = False
    review_reasons: list[str] = Field(default_factory=list)
    provisional: bool = False
    verdict_override: Literal["pass", "fail"] | None = None
    overridden: bool = False
    overrides: list[Override] = Field(default_factory=list)
    tags: list[Tag] = Field(default_factory=list)
    revision: int
    created_at: datetime
    graded_at: datetime | None
    #: the scenario's ground-truth version graded against (null when inline or not visible)
    scenario_version: int | None = None
    #: whether this is its submission's current grading (false: a promoted regrade
    #: replaced it, naming the new one in ``superseded_by``; a shadow regrade's); in
    #: every view, a submitter's too
    is_current: bool = True
    superseded_by: str | None = None
    #: the regrade job that made this grading; null for a submission's own grading
    regrade_job_id: str | None = None
    submission: Submission
    withheld: list[str] = Field(default_factory=list)
    view: Literal["full", "answers", "verdict"] = "full"

    @property
    def done(self) -> bool:
        """Whether the grading left ``pending`` (graded, unscored or cancelled)."""
        return self.status != "pending"


class GradingPage(_Model):
    """One page of gradings, newest first; ``next_cursor`` is None on the last."""

    items: list[Grading]
    next_cursor: str | None


class RegradeJob(_Model):
    """A regrade job and its progress (the server's object, fields beyond these kept)."""

    id: str
    state: str
    total: int = 0
    done: int = 0
    failed: int = 0

    @property
    def finished(self) -> bool:
        """Whether the job stopped for good (done, failed or cancelled)."""
        return self.state in {"done", "failed", "cancelled"}


class Scenario(_Model):
    """A registered scenario; ``ground_truth``, ``version`` and ``revision`` (its ETag)
    only for adjudicators and admins (``withheld`` names what a submitter does not get)."""

    id: str
    set: str
    ground_truth: str | None
    #: the newest version of its ground truth
    version: int | None
    #: every change counted (a new ground truth, title, tag list or set): the ETag an
    #: update names
    revision: int | None = None
    title: str | None
    tags: list[str]
    created_at: datetime
    updated_at: datetime | None = None
    withheld: list[str] = Field(default_factory=list)


class ScenarioPage(_Model):
    """One page of scenarios in id order; ``next_cursor`` is None on the last."""

    items: list[Scenario]
    next_cursor: str | None


class ScenarioVersion(_Model):
    """One version of a scenario's ground truth."""

    scenario_id: str
    version: int
    ground_truth: str
    note: str
    created_by: str
    created_at: datetime


class ScenarioVersions(_Model):
    """Every version of a scenario's ground truth, oldest first."""

    scenario_id: str
    current_version: int
    items: list[ScenarioVersion]


class ScenarioLoadItem(_Model):
    """What loading or updating one scenario did, and its version and revision
    afterwards."""

    id: str
    outcome: Literal["created", "unchanged", "new_version", "updated"]
    version: int
    #: the scenario's revision after it (its ETag)
    revision: int
    changed: list[str] = Field(default_factory=list)


class ScenarioLoadReport(_Model):
    """What a bulk load did, item by item in the order given, and the counts."""

    items: list[ScenarioLoadItem]
    counts: dict[str, int]


class ImportRowError(_Model):
    """A row an import left out: where (``file:line`` or ``line N``), the field to blame
    (a CSV column, a JSON field's path) when there is one, and why."""

    where: str
    field: str | None = None
    message: str


class ImportJob(_Model):
    """An import job: its state, rows done of the total, rows refused and summary."""

    id: str
    kind: str
    archive: str
    state: str
    rubric: str | None
    strict: bool
    total: int | None
    done: int
    report: dict[str, Any]
    errors: list[ImportRowError]
    #: rows that repeat an imported attempt's key with other content, left out
    conflicts: list[ImportRowError] = []
    size: int
    sha256: str
    attempts: int
    created_by: str
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None

    @property
    def finished(self) -> bool:
        """Whether the job ended (done or failed)."""
        return self.state in {"done", "failed"}
