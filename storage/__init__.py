"""Persistence: SQLModel tables, the store, the audit hash chain, Alembic migrations.

SQLite (WAL, foreign keys on, ``BEGIN IMMEDIATE``) is the embedded default;
PostgreSQL through psycopg 3 serves teams and several workers. May import ``judge``,
never ``api``.
"""

from __future__ import annotations

import storage.regrade.batch_tables  # noqa: F401  (registers the batch engines' tables)
from storage.audit import (
    GENESIS_HASH,
    ChainKey,
    ChainReport,
    Checkpoint,
    CheckpointError,
    append_event,
    check_checkpoint,
    make_checkpoint,
    verify_chain,
)
from storage.engine import default_database_url, is_postgres, make_engine, session_factory
from storage.errors import (
    Conflict,
    IdempotencyConflict,
    InvalidCursor,
    InvalidReview,
    NotFound,
    PreconditionFailed,
    StorageError,
)
from storage.migrate import current_revision, head_revision, require_newest, upgrade
from storage.models import (
    Claim,
    FinishedGrading,
    GradingFilter,
    GradingView,
    NewSubmission,
    SubmissionOutcome,
)
from storage.quality_tables import CalibrationRunRecord
from storage.regrade.tables import JudgeCacheRecord, RegradeJobRecord
from storage.review_tables import (
    FailureTagRecord,
    HumanLabelRecord,
    OverrideRecord,
    ReviewClaimRecord,
    TagVocabularyRecord,
)
from storage.scenario_tables import ScenarioVersionRecord
from storage.store import Store
from storage.tables import (
    AnswerRecord,
    AuditRecord,
    GradingRecord,
    JudgeCallRecord,
    RubricVersionRecord,
    ScenarioRecord,
    SubmissionRecord,
    TokenRecord,
)
from storage.tokens import ROLES

__all__ = [
    "GENESIS_HASH",
    "ROLES",
    "AnswerRecord",
    "AuditRecord",
    "CalibrationRunRecord",
    "ChainKey",
    "ChainReport",
    "Checkpoint",
    "CheckpointError",
    "Claim",
    "Conflict",
    "FailureTagRecord",
    "FinishedGrading",
    "GradingFilter",
    "GradingRecord",
    "GradingView",
    "HumanLabelRecord",
    "IdempotencyConflict",
    "InvalidCursor",
    "InvalidReview",
    "JudgeCacheRecord",
    "JudgeCallRecord",
    "NewSubmission",
    "NotFound",
    "OverrideRecord",
    "PreconditionFailed",
    "RegradeJobRecord",
    "ReviewClaimRecord",
    "RubricVersionRecord",
    "ScenarioRecord",
    "ScenarioVersionRecord",
    "StorageError",
    "Store",
    "SubmissionOutcome",
    "SubmissionRecord",
    "TagVocabularyRecord",
    "TokenRecord",
    "append_event",
    "check_checkpoint",
    "current_revision",
    "default_database_url",
    "head_revision",
    "is_postgres",
    "make_checkpoint",
    "make_engine",
    "require_newest",
    "session_factory",
    "upgrade",
    "verify_chain",
]
