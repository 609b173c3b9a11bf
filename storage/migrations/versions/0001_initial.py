"""Initial schema: rubric versions, scenarios, tokens, submissions, gradings, answers,
judge calls and the audit log.

Written by hand from an autogenerate draft. Timestamps are plain
``DateTime(timezone=True)`` here; the models' ``UTCDateTime`` decorates that type, so
autogenerate finds no difference. Names follow ``storage.tables.NAMING_CONVENTION``.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when(name: str, *, nullable: bool) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _string(name: str, length: int, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def upgrade() -> None:
    """Create every table of the first release."""
    op.create_table(
        "rubric_version",
        _string("key", 160),
        _string("rubric_id", 64),
        _string("version", 64),
        _string("label", 32),
        _string("content_hash", 64),
        sa.Column("content", sa.JSON(), nullable=False),
        _when("created_at", nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_rubric_version")),
    )
    op.create_index(op.f("ix_rubric_version_rubric_id"), "rubric_version", ["rubric_id"])

    op.create_table(
        "scenario",
        _string("id", 128),
        sa.Column("ground_truth", sa.Text(), nullable=False),
        _string("title", 256),
        sa.Column("tags", sa.JSON(), nullable=False),
        _string("created_by", 64),
        _when("created_at", nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scenario")),
    )

    op.create_table(
        "api_token",
        _string("id", 32),
        _string("name", 128),
        _string("role", 16),
        _string("token_hash", 64),
        _when("created_at", nullable=False),
        _when("expires_at", nullable=True),
        _when("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_token")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_token_token_hash")),
    )

    op.create_table(
        "submission",
        _string("id", 32),
        sa.Column("diagnosis", sa.Text(), nullable=False),
        sa.Column("ground_truth", sa.Text(), nullable=False),
        _string("ground_truth_source", 16),
        _string("scenario_id", 128, nullable=True),
        _string("agent", 256, nullable=True),
        _string("model", 256, nullable=True),
        _string("run_id", 256, nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=True),
        sa.Column("metadata", sa.JSON(), nullable=False),
        _string("submitted_by", 64),
        _string("idempotency_key", 256, nullable=True),
        _string("request_hash", 64),
        _when("created_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenario.id"], name=op.f("fk_submission_scenario_id_scenario")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submission")),
        sa.UniqueConstraint(
            "submitted_by",
            "idempotency_key",
            name=op.f("uq_submission_submitted_by_idempotency_key"),
        ),
    )
    for column in ("agent", "model", "run_id", "scenario_id", "created_at"):
        op.create_index(op.f(f"ix_submission_{column}"), "submission", [column])

    op.create_table(
        "grading",
        _string("id", 32),
        _string("submission_id", 32),
        _string("rubric_id", 64),
        _string("rubric_version", 64),
        _string("judge_spec", 512),
        _string("judge_backend", 32),
        _string("judge_model", 256),
        _string("status", 16),
        _string("unscored_reason", 64, nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("pending_reason", sa.Text(), nullable=True),
        _when("not_before", nullable=True),
        _string("lease_owner", 128, nullable=True),
        _when("lease_expires_at", nullable=True),
        sa.Column("claim_count", sa.Integer(), nullable=False),
        sa.Column("yes_count", sa.Integer(), nullable=True),
        sa.Column("composite", sa.Float(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("judge_passed", sa.Boolean(), nullable=True),
        sa.Column("decisive", sa.Boolean(), nullable=True),
        sa.Column("needs_review", sa.Boolean(), nullable=False),
        sa.Column("review_reasons", sa.JSON(), nullable=False),
        sa.Column("is_current", sa.Boolean(), nullable=False),
        _string("superseded_by", 32, nullable=True),
        sa.Column("revision", sa.Integer(), nullable=False),
        _when("created_at", nullable=False),
        _when("graded_at", nullable=True),
        sa.ForeignKeyConstraint(
            ["submission_id"], ["submission.id"], name=op.f("fk_grading_submission_id_submission")
        ),
        sa.ForeignKeyConstraint(
            ["superseded_by"], ["grading.id"], name=op.f("fk_grading_superseded_by_grading")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_grading")),
    )
    op.create_index(op.f("ix_grading_submission_id"), "grading", ["submission_id"])
    op.create_index(op.f("ix_grading_is_current"), "grading", ["is_current"])
    op.create_index(op.f("ix_grading_passed"), "grading", ["passed"])
    op.create_index("ix_grading_status_created_at", "grading", ["status", "created_at"])
    op.create_index("ix_grading_created_at_id", "grading", ["created_at", "id"])

    op.create_table(
        "answer",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _string("grading_id", 32),
        _string("question_id", 32),
        _string("dimension_id", 32),
        sa.Column("answer", sa.Boolean(), nullable=False),
        sa.Column("judge_answer", sa.Boolean(), nullable=False),
        sa.Column("reasoning", sa.Text(), nullable=False),
        sa.Column("evidence", sa.Text(), nullable=False),
        sa.Column("evidence_verified", sa.Boolean(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["grading_id"], ["grading.id"], name=op.f("fk_answer_grading_id_grading")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_answer")),
        sa.UniqueConstraint(
            "grading_id", "question_id", name=op.f("uq_answer_grading_id_question_id")
        ),
    )

    op.create_table(
        "judge_call",
        _string("id", 32),
        _string("grading_id", 32),
        sa.Column("position", sa.Integer(), nullable=False),
        _string("purpose", 16),
        _string("backend", 32),
        _string("model", 256),
        _string("base_url", 512, nullable=True),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("reply_schema", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("response_text", sa.Text(), nullable=True),
        _string("response_model", 256, nullable=True),
        _string("fingerprint", 256, nullable=True),
        _string("response_format", 32, nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("attempts", sa.JSON(), nullable=False),
        _string("error_code", 64, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        _when("created_at", nullable=False),
        sa.ForeignKeyConstraint(
            ["grading_id"], ["grading.id"], name=op.f("fk_judge_call_grading_id_grading")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_call")),
    )
    op.create_index(op.f("ix_judge_call_grading_id"), "judge_call", ["grading_id"])

    op.create_table(
        "audit_log",
        # assigned by storage.audit under the chain lock, so the row hash can cover it
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        _when("created_at", nullable=False),
        _string("event", 64),
        _string("entity_type", 32),
        _string("entity_id", 160),
        _string("actor", 128),
        sa.Column("payload", sa.JSON(), nullable=False),
        _string("prev_hash", 64),
        _string("hash", 64),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_entity_id"), "audit_log", ["entity_id"])


def downgrade() -> None:
    """Drop every table, dependents first."""
    for table in (
        "audit_log",
        "judge_call",
        "answer",
        "grading",
        "submission",
        "api_token",
        "scenario",
        "rubric_version",
    ):
        op.drop_table(table)
