"""API input and output models, apart from the table models of ``storage``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator

from api.service.request_types import EARLIEST, LATEST, exactly_one
from storage.storable import MAX_INT32

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_INT32",
    "AnswerPublic",
    "DimensionPublic",
    "GradingCore",
    "GradingPage",
    "GradingPublic",
    "GradingRead",
    "OverrideCreate",
    "OverridePublic",
    "SubmissionCreate",
    "SubmissionPublic",
    "SubmitterAnswer",
    "SubmitterGradingAnswers",
    "SubmitterGradingVerdict",
    "SubmitterSubmission",
    "SubmitterView",
    "TagPublic",
    "VetoPublic",
    "VotePublic",
]

_NAME = Field(default=None, max_length=200)
_TEXT_SCHEMA: dict[str, Any] = {"type": "string"}


class SubmissionCreate(BaseModel):
    """A diagnosis to grade, with exactly one of ``scenario_id`` and ``ground_truth``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=exactly_one(
            {"scenario_id": _TEXT_SCHEMA},
            {"ground_truth": _TEXT_SCHEMA},
            fields=("scenario_id", "ground_truth"),
        ),
    )

    diagnosis: StrictStr
    scenario_id: StrictStr | None = Field(default=None, max_length=128)
    ground_truth: StrictStr | None = None
    agent: StrictStr | None = _NAME
    model: StrictStr | None = _NAME
    run_id: StrictStr | None = _NAME
    attempt: StrictInt | None = Field(default=None, ge=0, le=MAX_INT32)
    metadata: dict[str, Any] = Field(default_factory=dict)
    rubric: StrictStr | None = Field(default=None, max_length=64, description="rubric id")
    trace: StrictStr | list[dict[str, Any]] | None = Field(
        default=None,
        description="the agent's trace: a list of steps as SREGym records them (objects "
        "such as {tool, input, output}) or free text; within the diagnosis' size limit",
    )

    def truth_problem(self) -> str | None:
        """Why the ground truth is not given exactly once, if it is not."""
        if (self.scenario_id is None) == (self.ground_truth is None):
            return "give exactly one of scenario_id and ground_truth"
        return None


class VotePublic(BaseModel):
    """One judge's (or one sample's) answer to a question, for adjudicators to weigh."""

    judge: str
    sample: int
    answer: Literal["yes", "no"]
    confidence: float | None
    #: the stored judge call the vote came from (see the grading's history)
    call_id: str | None


class VetoPublic(BaseModel):
    """The check in code that vetoed (the yes counts as no) or flagged (the yes stands, a
    human should look) a judge's yes, and in words what it looked for. Its words may name
    the ground truth's component and values: it is withheld with the ground truth."""

    #: ``grounding.component``, ``grounding.origin_consistent``, ``grounding.values``,
    #: ``grounding.consistent_values``, or ``evidence.`` and the quote check's outcome
    #: (``evidence.empty``, ``evidence.too_short``, ``evidence.not_found``,
    #: ``evidence.injected``)
    check: str
    effect: Literal["vetoed", "flagged"]
    reason: str


class AnswerPublic(BaseModel):
    """One question's effective answer beside the judge's."""

    question_id: str
    dimension_id: str
    answer: Literal["yes", "no"]
    judge_answer: Literal["yes", "no"]
    reasoning: str
    evidence: str
    evidence_verified: bool | None
    #: why the quote does not back a yes (empty, too short, not in the diagnosis, only in a
    #: passage flagged as injected), where ``evidence_verified`` is false; else null
    evidence_reason: str | None = None
    confidence: float | None
    overridden: bool
    #: every vote of a panel or of samples; one vote for a single judge
    votes: list[VotePublic] = []
    #: the deterministic grounding check of a judge "yes" (``passed: ...``, ``vetoed: ...``,
    #: ``flagged: ...``) where the grading was made in this process (``sre-judge grade``);
    #: stored gradings carry it in ``detail``
    grounding: str | None = None
    #: the check in code that vetoed or flagged the judge's yes, or null
    veto: VetoPublic | None = None
    #: whether the quoted evidence appears in the agent's trace (``found``,
    #: ``not_found``), ``no_trace`` when the submission has none, null where nothing is
    #: quoted; a check in code that changes no answer
    trace_check: Literal["found", "not_found", "no_trace"] | None = None


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
    #: where the ground truth came from: a registered scenario, or the submitter (inline)
    ground_truth_source: Literal["scenario", "inline"] = "scenario"
    #: SHA-256 of the ground truth graded against (its version); null where it is hidden
    ground_truth_sha256: str | None = None
    #: the scenario's version of the ground truth (null when inline or not visible)
    scenario_version: int | None = None
    #: the token id that submitted it
    submitted_by: str | None = None
    created_at: datetime
    #: the agent's trace as sent (credentials redacted): a list of steps or free text
    trace: str | list[dict[str, Any]] | None = None


class OverridePublic(BaseModel):
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
    #: the override a regrade copied this one from (on the grading it replaced); None for
    #: one a human made here
    carried_from: str | None = None


class TagPublic(BaseModel):
    """A failure tag on a grading."""

    id: int
    tag: str
    note: str
    author: str
    created_at: datetime


class GradingCore(BaseModel):
    """What a judge and the rule decided: the grading object without its stored context.

    The output of ``sre-judge grade`` (no ids: nothing is stored) and the first part of
    every :class:`GradingPublic`.
    """

    id: str | None = None
    submission_id: str | None = None
    #: cancelled: an item of a cancelled regrade job, never graded
    status: Literal["pending", "graded", "unscored", "cancelled"]
    unscored_reason: str | None
    pending_reason: str | None = None
    detail: str | None
    rubric: dict[str, str]
    judge: dict[str, str]
    answers: list[AnswerPublic]
    dimensions: list[DimensionPublic]
    yes_count: int | None
    composite: float | None
    passed: bool | None
    #: the rule passed but the pass is held for a human (an injection signal, or a judge
    #: the pass policy does not trust alone; ``review_reasons`` say which): ``passed`` is
    #: null until an adjudicator gives a verdict override; reports count it apart
    held: bool = False
    judge_passed: bool | None
    decisive: bool | None
    needs_review: bool
    review_reasons: list[str]


class GradingPublic(GradingCore):
    """The grading object: the judge's part (:class:`GradingCore`) with what storing adds."""

    id: str
    submission_id: str
    #: graded by a judge that no calibration run has qualified
    provisional: bool = False
    #: a human verdict that wins over the rule, if one is in force
    verdict_override: Literal["pass", "fail"] | None = None
    overridden: bool = False
    #: every override of this grading, oldest first (withdrawn ones included)
    overrides: list[OverridePublic] = Field(default_factory=list)
    tags: list[TagPublic] = Field(default_factory=list)
    revision: int
    created_at: datetime
    graded_at: datetime | None
    #: the scenario's ground-truth version graded against; null for an inline ground
    #: truth and for readers who may not see the ground truth
    scenario_version: int | None = None
    #: whether this is its submission's current grading, the one reports count: false
    #: for one a promoted regrade replaced (``superseded_by`` names the grading that
    #: did), for a shadow regrade's and for a cancelled regrade item
    is_current: bool = True
    superseded_by: str | None = None
    #: the regrade job that made this grading; null for a submission's own grading
    regrade_job_id: str | None = None
    submission: SubmissionPublic
    #: fields left out for this reader: empty in the full object (a submitter that may
    #: not see the ground truth gets a view instead, whose ``withheld`` names them)
    withheld: list[str] = Field(default_factory=list)
    #: which view of the grading this is: ``full`` here; a submitter reading a grading
    #: against a registered scenario gets ``verdict`` or ``answers`` (SubmitterGrading*)
    view: Literal["full"] = "full"


#: how much of a grading against a registered scenario its submitter sees
#: (``SRE_JUDGE_SUBMITTER_VIEW``): the verdict, or the verdict and the effective answers
SubmitterView = Literal["verdict", "answers"]


class SubmitterSubmission(BaseModel):
    """What a submitter sent, as it reads it back: its own fields, nothing of the
    scenario's ground truth (neither the text, nor its hash or version)."""

    id: str
    agent: str | None
    model: str | None
    scenario_id: str | None
    run_id: str | None
    attempt: int | None
    metadata: dict[str, Any]
    diagnosis: str
    ground_truth_source: Literal["scenario", "inline"]
    submitted_by: str | None
    created_at: datetime
    #: the agent's trace it sent (credentials redacted), or null
    trace: str | list[dict[str, Any]] | None = None


class SubmitterGradingVerdict(BaseModel):
    """A grading against a registered scenario as its submitter sees it under
    ``SRE_JUDGE_SUBMITTER_VIEW=verdict``: the status and the verdict, nothing the judge
    or a code check said about single questions.

    These fields are all a submitter gets (a whitelist): whatever the full grading
    object gains later stays out of this view until it is added here.
    """

    view: Literal["verdict"] = "verdict"
    id: str
    submission_id: str
    status: Literal["pending", "graded", "unscored", "cancelled"]
    #: why there is no verdict, a code (``context_overflow`` is decided from the
    #: diagnosis alone); the account in words (``detail``) is withheld
    unscored_reason: str | None
    passed: bool | None
    held: bool
    rubric: dict[str, str]
    judge: dict[str, str]
    revision: int
    created_at: datetime
    graded_at: datetime | None
    #: whether this is the submission's current grading, the verdict reports count: false
    #: for one a promoted regrade replaced (``superseded_by`` names the grading that did,
    #: which the submitter reads too), for a shadow regrade's and for a cancelled regrade
    #: item. What a regrade decided, nothing of the ground truth
    is_current: bool = True
    superseded_by: str | None = None
    submission: SubmitterSubmission
    #: the fields of the full grading object this view leaves out (``answers.evidence``,
    #: ``judge_passed``, ``detail``, ...): the same list for every grading of one view
    withheld: list[str] = Field(default_factory=list)


class SubmitterAnswer(BaseModel):
    """One question's effective answer (after code checks and human overrides), without
    the judge's own answer, its evidence or which check changed it."""

    question_id: str
    dimension_id: str
    answer: Literal["yes", "no"]


class SubmitterGradingAnswers(SubmitterGradingVerdict):
    """The verdict view with the nine effective answers and what they add up to
    (``SRE_JUDGE_SUBMITTER_VIEW=answers``): what SREGym's results CSV needs."""

    view: Literal["answers"] = "answers"  # type: ignore[assignment]
    answers: list[SubmitterAnswer]
    dimensions: list[DimensionPublic]
    yes_count: int | None
    composite: float | None


#: a grading as one reader may see it: the whole object, or a submitter's view
GradingRead = GradingPublic | SubmitterGradingAnswers | SubmitterGradingVerdict


class GradingPage(BaseModel):
    """One page of gradings; pass ``next_cursor`` as ``cursor`` for the next."""

    items: list[GradingRead]
    next_cursor: str | None


class OverrideCreate(BaseModel):
    """One human correction: an answer, the verdict, or the withdrawal of an override."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra=exactly_one(
            {"question_id": _TEXT_SCHEMA, "answer": {"enum": ["yes", "no"]}},
            {"verdict": {"enum": ["pass", "fail"]}},
            {"withdraw": _TEXT_SCHEMA},
            fields=("question_id", "answer", "verdict", "withdraw"),
        ),
    )

    reason: StrictStr = Field(min_length=3, max_length=4000)
    question_id: StrictStr | None = Field(default=None, max_length=32)
    answer: Literal["yes", "no"] | None = None
    verdict: Literal["pass", "fail"] | None = None
    withdraw: StrictStr | None = Field(default=None, max_length=32, description="override id")

    @field_validator("reason")
    @classmethod
    def _reason_written(cls, reason: str) -> str:
        """A reason is words: three characters at least besides spaces and line breaks."""
        if len(reason.strip()) < 3:
            raise ValueError("give a reason of at least 3 characters besides blanks")
        return reason

    def kind_problem(self) -> tuple[str, str] | None:
        """(field, message) when the body is not exactly one kind of override."""
        kinds = [
            self.question_id is not None or self.answer is not None,
            self.verdict is not None,
            self.withdraw is not None,
        ]
        if sum(kinds) != 1:
            return "body", "give exactly one of: question_id with answer, verdict, or withdraw"
        if kinds[0] and self.question_id is None:
            return "question_id", "an answer override needs question_id"
        if kinds[0] and self.answer is None:
            return "answer", "an answer override needs answer"
        return None

    @property
    def kind(self) -> Literal["answer", "verdict", "withdraw"]:
        """Which kind of override this is."""
        if self.withdraw is not None:
            return "withdraw"
        return "verdict" if self.verdict is not None else "answer"
