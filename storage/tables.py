"""The tables, as SQLModel ``table=True`` classes named ``XRecord``.

These are storage shapes, not API schemas: SQLModel does not validate ``table=True``
models, so callers validate input before it gets here. Long text is ``Text``, JSON is
``sqlalchemy.JSON``, and every timestamp is a timezone-aware UTC ``UTCDateTime``.
Constraint names follow :data:`NAMING_CONVENTION` so later migrations (batch mode on
SQLite) can address them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from sqlalchemy import (
    JSON,
    Column,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    text,
    types,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.engine.interfaces import Dialect
from sqlmodel import Field, SQLModel

from storage.canonical import utcnow

__all__ = [
    "NAMING_CONVENTION",
    "AnswerRecord",
    "AuditRecord",
    "GradingRecord",
    "JudgeCallRecord",
    "RubricVersionRecord",
    "ScenarioRecord",
    "SubmissionRecord",
    "TokenRecord",
    "UTCDateTime",
    "empty_dict",
    "empty_list",
    "new_id",
    "row_values",
]


class UTCDateTime(types.TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that only accepts aware values and returns them in UTC.

    SQLite keeps no offset, so values are converted to UTC before they are bound; that
    also keeps SQLite's text timestamps ordered correctly.
    """

    impl = types.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert to UTC; refuse naive datetimes."""
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError("naive datetime; storage only handles timezone-aware values")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to SQLite's naive values; normalize others to UTC."""
        if value is None:
            return None
        if value.utcoffset() is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _copied_on_insert(name: str) -> Callable[[Any], Any]:
    """The SQL default of a column that takes column ``name``'s value when not given (a
    Core INSERT of values without it)."""

    def copy(context: Any) -> Any:
        return context.get_current_parameters()[name]

    return copy


def new_id() -> str:
    """A fresh 32-hex-digit id (uuid4)."""
    return uuid4().hex


def row_values(record: SQLModel) -> dict[str, Any]:
    """A record's column values keyed by column name, for a Core INSERT of the record."""
    mapper = sa_inspect(type(record))
    return {attr.columns[0].key: getattr(record, attr.key) for attr in mapper.column_attrs}


def empty_dict() -> dict[str, Any]:
    """A new empty dict: the default factory of JSON object columns.

    A Python function, not the ``dict`` type: pydantic inspects a default factory's
    signature on every model construction, and for builtins that means parsing their
    text signature (a tenth of a submission's CPU in bench/overhead.py).
    """
    return {}


def empty_list() -> list[Any]:
    """A new empty list: the default factory of JSON array columns (see ``empty_dict``)."""
    return []


NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
SQLModel.metadata.naming_convention = NAMING_CONVENTION


def _created() -> Any:
    return Field(default_factory=utcnow, sa_type=UTCDateTime, nullable=False)


def _when() -> Any:
    return Field(default=None, sa_type=UTCDateTime, nullable=True)


def _json(factory: type) -> Any:
    made = empty_dict if factory is dict else empty_list
    return Field(default_factory=made, sa_type=JSON, nullable=False)


class RubricVersionRecord(SQLModel, table=True):
    """One version of a rubric, kept whole so old gradings can be explained."""

    __tablename__ = "rubric_version"

    #: ``f"{rubric_id}@{version}"``
    key: str = Field(primary_key=True, sa_type=String(160))
    rubric_id: str = Field(sa_type=String(64), index=True)
    version: str = Field(sa_type=String(64))
    label: str = Field(sa_type=String(32))
    content_hash: str = Field(sa_type=String(64))
    #: ``rubric.model_dump(mode="json")``
    content: dict[str, Any] = _json(dict)
    created_at: datetime = _created()


class ScenarioRecord(SQLModel, table=True):
    """A registered fault scenario and its ground truth (empty for a healthy control)."""

    __tablename__ = "scenario"

    id: str = Field(primary_key=True, sa_type=String(128))
    ground_truth: str = Field(default="", sa_type=Text)
    title: str = Field(default="", sa_type=String(256))
    tags: list[str] = _json(list)
    created_by: str = Field(sa_type=String(64))
    created_at: datetime = _created()
    #: the newest version of the ground truth (``scenario_version``); 1 when registered
    version: int = 1
    #: changes written in place (title, tag list or set, the ground truth kept)
    in_place_changes: int = 0
    #: the set it belongs to, e.g. ``public`` or ``held-out``
    scenario_set: str = Field(default="default", sa_type=String(64), index=True)
    #: when the newest version was made
    updated_at: datetime | None = _when()

    @property
    def revision(self) -> int:
        """Every change counted (a new ground truth, title, tag list or set): its ETag."""
        return self.version + self.in_place_changes


class TokenRecord(SQLModel, table=True):
    """An API token; only the SHA-256 of its secret is stored."""

    __tablename__ = "api_token"

    id: str = Field(primary_key=True, sa_type=String(32))
    name: str = Field(sa_type=String(128))
    #: submitter | adjudicator | admin
    role: str = Field(sa_type=String(16))
    token_hash: str = Field(sa_type=String(64), unique=True)
    created_at: datetime = _created()
    expires_at: datetime | None = _when()
    revoked_at: datetime | None = _when()
    #: may send its own ground truth when SRE_JUDGE_INLINE_GROUND_TRUTH is per_token
    inline_ground_truth: bool = False


class SubmissionRecord(SQLModel, table=True):
    """A diagnosis with the ground truth it is graded against and who sent it."""

    __tablename__ = "submission"
    __table_args__ = (
        UniqueConstraint("submitted_by", "idempotency_key"),
        Index("ix_submission_created_at", "created_at"),
        # a token's attempts on a scenario within the hour, counted in the transaction
        # that stores the next one (``storage.attempts``): a range of a few rows
        Index("ix_submission_attempts", "submitted_by", "scenario_id", "created_at"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    diagnosis: str = Field(sa_type=Text)
    #: a copy of the scenario's ground truth at submission time, or the inline one
    ground_truth: str = Field(sa_type=Text)
    #: scenario (a registered scenario's) | inline (sent with the submission)
    ground_truth_source: str = Field(sa_type=String(16))
    #: SHA-256 of ``ground_truth``: the version it was graded against
    ground_truth_sha256: str | None = Field(default=None, sa_type=String(64))
    scenario_id: str | None = Field(
        default=None, sa_type=String(128), foreign_key="scenario.id", index=True
    )
    #: the scenario's ground-truth version copied into ``ground_truth`` (None for inline)
    scenario_version: int | None = None
    agent: str | None = Field(default=None, sa_type=String(256), index=True)
    model: str | None = Field(default=None, sa_type=String(256), index=True)
    run_id: str | None = Field(default=None, sa_type=String(256), index=True)
    attempt: int | None = None
    metadata_: dict[str, Any] = Field(
        default_factory=empty_dict, sa_column=Column("metadata", JSON, nullable=False)
    )
    #: credentials found and redacted at ingestion: kinds and positions, never values
    redactions: list[dict[str, Any]] = _json(list)
    #: what screening the diagnosis at intake found (``judge.screening.Screening.record``:
    #: review reasons, notes, injected spans); None: screened when graded
    screening: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    #: the agent's trace as sent or imported (``judge.trace.Trace``: free text or a list
    #: of steps), its credentials redacted; None: none was given
    trace: str | list[dict[str, Any]] | None = Field(default=None, sa_type=JSON(none_as_null=True))
    #: the token id, or "anonymous"
    submitted_by: str = Field(sa_type=String(64))
    idempotency_key: str | None = Field(default=None, sa_type=String(256))
    #: SHA-256 of the canonical request, to tell a replay from a reused key
    request_hash: str = Field(sa_type=String(64))
    created_at: datetime = _created()


#: the statuses of a grading whose judge has answered (its result is in): a pending one
#: and an item of a cancelled regrade job (pending again once the job resumes) have none,
#: so nothing a human decides on them can stand
RESULT_STATUSES = ("graded", "unscored")


class GradingRecord(SQLModel, table=True):
    """One rubric applied by one judge to one submission: pending, graded or unscored."""

    __tablename__ = "grading"
    __table_args__ = (
        Index("ix_grading_status_created_at", "status", "created_at"),
        Index("ix_grading_created_at_id", "created_at", "id"),
        # the list of gradings in its order (storage.gradings.ListPosition), read backwards
        Index("ix_grading_list_order", "listed_at", "submission_id", "id"),
        # a regrade job's items by status, from the index alone (its progress)
        Index("ix_grading_regrade_job_id_status", "regrade_job_id", "status"),
        # the queue's claim order (storage.claims): live first, then oldest first
        Index(
            "ix_grading_claim_order",
            "status",
            text("(regrade_job_id IS NOT NULL)"),
            "created_at",
            "id",
        ),
    )

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    submission_id: str = Field(sa_type=String(32), foreign_key="submission.id", index=True)
    rubric_id: str = Field(sa_type=String(64))
    rubric_version: str = Field(sa_type=String(64))
    #: the judge as configured, e.g. ``openai:model@http://host/v1``
    judge_spec: str = Field(sa_type=String(512))
    judge_backend: str = Field(sa_type=String(32))
    judge_model: str = Field(sa_type=String(256))
    #: pending | graded | unscored | cancelled (an item of a cancelled regrade job)
    status: str = Field(default="pending", sa_type=String(16))
    unscored_reason: str | None = Field(default=None, sa_type=String(64))
    detail: str | None = Field(default=None, sa_type=Text)
    #: why a pending grading is still pending (e.g. the judge was unreachable)
    pending_reason: str | None = Field(default=None, sa_type=Text)
    #: do not claim before this time
    not_before: datetime | None = _when()
    lease_owner: str | None = Field(default=None, sa_type=String(128))
    lease_expires_at: datetime | None = _when()
    claim_count: int = 0
    yes_count: int | None = None
    composite: float | None = Field(default=None, sa_type=Float)
    passed: bool | None = Field(default=None, index=True)
    judge_passed: bool | None = None
    decisive: bool | None = None
    needs_review: bool = False
    review_reasons: list[str] = _json(list)
    #: a rule pass of a diagnosis flagged for injection: passed is None until a verdict
    held: bool = False
    #: a human override is in force (answers or verdict); passed/yes_count are effective
    overridden: bool = False
    #: graded by a judge that has not qualified on a calibration run
    provisional: bool = False
    #: the digest of the model behind the judge's name when it graded (a panel: its
    #: members', comma-separated), where the server reported one
    judge_digest: str | None = Field(default=None, sa_type=String(512))
    is_current: bool = Field(default=True, index=True)
    superseded_by: str | None = Field(
        default=None,
        sa_column=Column(String(32), ForeignKey("grading.id"), nullable=True),
    )
    #: bumped on every change; an ETag for conditional writes
    revision: int = 1
    created_at: datetime = _created()
    #: the grading's place in the list of gradings (newest first, ``storage.gradings``):
    #: its ``created_at``, unless it is a promoted regrade item, which takes the place of
    #: the grading it replaced (``storage.regrade.lifecycle``): a submission keeps its
    #: place in the list when a regrade of it is promoted
    listed_at: datetime = Field(
        default=None,
        sa_column=Column(UTCDateTime, nullable=False, default=_copied_on_insert("created_at")),
    )
    graded_at: datetime | None = _when()
    #: the regrade job that created this grading (None for gradings of submissions)
    regrade_job_id: str | None = Field(
        default=None,
        sa_column=Column(String(32), ForeignKey("regrade_job.id"), nullable=True),
    )
    #: for a regrade item: the grading that was current when the job started
    previous_grading_id: str | None = Field(
        default=None,
        sa_column=Column(String(32), ForeignKey("grading.id"), nullable=True),
    )
    #: the scenario's ground-truth version graded against (None for an inline one)
    scenario_version: int | None = None
    #: every vote cast, in the order cast: a judge's (or one sample's) answer to one
    #: question, ``{"judge_spec", "sample_index", "question_id", "answer", "confidence",
    #: "call_id"}`` (``call_id``: the judge call it came from); kept whether or not the
    #: grading has answers (a panel unscored by one member keeps the others' votes);
    #: null where none was recorded
    votes: list[dict[str, Any]] | None = Field(default=None, sa_type=JSON(none_as_null=True))

    def model_post_init(self, context: Any, /) -> None:
        """A grading made without a list position is listed at its creation time."""
        if self.listed_at is None:
            self.listed_at = self.created_at


class AnswerRecord(SQLModel, table=True):
    """One question's answer in a grading: the effective one and the judge's own."""

    __tablename__ = "answer"
    # the unique constraint's index leads with grading_id and serves lookups by grading
    __table_args__ = (UniqueConstraint("grading_id", "question_id"),)

    id: int | None = Field(default=None, primary_key=True)
    grading_id: str = Field(sa_type=String(32), foreign_key="grading.id")
    question_id: str = Field(sa_type=String(32))
    dimension_id: str = Field(sa_type=String(32))
    answer: bool
    judge_answer: bool
    reasoning: str = Field(default="", sa_type=Text)
    evidence: str = Field(default="", sa_type=Text)
    evidence_verified: bool | None = None
    #: the quote check's outcome (``judge.evidence.QuoteCheck``); null where nothing was
    #: checked, and for answers stored before it was recorded
    evidence_check: str | None = Field(default=None, sa_type=String(16))
    confidence: float | None = Field(default=None, sa_type=Float)
    position: int
    #: the check in code that vetoed or flagged the judge's yes: ``{"check", "effect",
    #: "reason"}`` (``judge.verdict.Veto``), or null
    veto: dict[str, Any] | None = Field(default=None, sa_type=JSON(none_as_null=True))


class JudgeCallRecord(SQLModel, table=True):
    """A judge call verbatim: prompt, schema, parameters, reply or error, attempts."""

    __tablename__ = "judge_call"
    # a grading's calls; and a regrade job's counts of calls and tokens by origin read
    # from the index alone (a row holds the whole prompt)
    __table_args__ = (
        Index(
            "ix_judge_call_grading_id_cached",
            "grading_id",
            "cached",
            "prompt_tokens",
            "completion_tokens",
        ),
        # the judge cache's look-ups (``storage.judge_cache``)
        Index("ix_judge_call_cache_key", "cache_key"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, sa_type=String(32))
    grading_id: str = Field(sa_type=String(32), foreign_key="grading.id")
    #: order of the calls of one grading
    position: int = 0
    #: grade | repair
    purpose: str = Field(sa_type=String(16))
    backend: str = Field(sa_type=String(32))
    model: str = Field(sa_type=String(256))
    base_url: str | None = Field(default=None, sa_type=String(512))
    messages: list[dict[str, Any]] = _json(list)
    reply_schema: dict[str, Any] = _json(dict)
    #: temperature, seed, max_tokens, num_ctx as sent
    params: dict[str, Any] = _json(dict)
    response_text: str | None = Field(default=None, sa_type=Text)
    response_model: str | None = Field(default=None, sa_type=String(256))
    fingerprint: str | None = Field(default=None, sa_type=String(256))
    response_format: str | None = Field(default=None, sa_type=String(32))
    #: the tokens the call cost (``JudgeCall.prompt_tokens``): its reply's, and those of
    #: a reply it cut at its budget and asked again (kept on that attempt too)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float = Field(default=0.0, sa_type=Float)
    attempts: list[dict[str, Any]] = _json(list)
    error_code: str | None = Field(default=None, sa_type=String(64))
    error: str | None = Field(default=None, sa_type=Text)
    created_at: datetime = _created()
    #: answered from the judge cache (no request reached the judge)
    cached: bool = False
    #: how the reply came when not from a live request: ``batch <id>`` (a batch engine)
    via: str | None = Field(default=None, sa_type=String(64))
    #: the judge cache key its reply is kept under (``storage.judge_cache``): set on the
    #: calls of a usable conversation of a deterministic judge; null otherwise
    cache_key: str | None = Field(default=None, sa_type=String(64))
    #: the reply's log-probabilities that its confidences are read from
    #: (``judge.confidence.confidence_tokens``), kept with a cache entry (``cache_key``
    #: set) for its replays: ``[{"token", "logprob", "top"}]``; null otherwise
    logprobs: list[dict[str, Any]] | None = Field(default=None, sa_type=JSON(none_as_null=True))


class AuditRecord(SQLModel, table=True):
    """One event of the append-only audit log, chained to the previous row by hash.

    ``seq`` is assigned as the last seq + 1 while the chain is locked (see
    ``storage.audit``), so the hash can cover it; rows are never updated or deleted.
    """

    __tablename__ = "audit_log"

    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    created_at: datetime = _created()
    event: str = Field(sa_type=String(64))
    entity_type: str = Field(sa_type=String(32))
    #: as wide as a judge's name (``judge_spec``): judge events name their judge here
    entity_id: str = Field(sa_type=String(512), index=True)
    actor: str = Field(sa_type=String(128))
    payload: dict[str, Any] = _json(dict)
    prev_hash: str = Field(sa_type=String(64))
    hash: str = Field(sa_type=String(64))
