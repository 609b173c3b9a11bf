"""Regrade batches: judge calls handed to a batch engine.

A regrade job graded through the OpenAI Batch API or an offline exchange keeps its
engine's state (``regrade_engine``), each batch submitted or results file imported
(``regrade_batch``) and each judge request with its reply (``regrade_batch_request``,
keyed by custom id). A judge call answered from a batch says which (``judge_call.via``).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the three tables and add ``judge_call.via`` (nullable: no table rebuild)."""
    op.create_table(
        "regrade_engine",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("retry", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["regrade_job.id"]),
        sa.PrimaryKeyConstraint("job_id"),
    )
    op.create_index(op.f("ix_regrade_engine_state"), "regrade_engine", ["state"])
    op.create_table(
        "regrade_batch",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("engine", sa.String(length=16), nullable=False),
        sa.Column("remote_id", sa.String(length=128), nullable=True),
        sa.Column("input_file_id", sa.String(length=128), nullable=True),
        sa.Column("output_file_id", sa.String(length=128), nullable=True),
        sa.Column("error_file_id", sa.String(length=128), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["regrade_job.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_regrade_batch_job_id"), "regrade_batch", ["job_id"])
    op.create_table(
        "regrade_batch_request",
        sa.Column("custom_id", sa.String(length=64), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("grading_id", sa.String(length=32), nullable=False),
        sa.Column("call", sa.Integer(), nullable=False),
        sa.Column("sample", sa.Integer(), nullable=False),
        sa.Column("prompt_hash", sa.String(length=64), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("batch_id", sa.String(length=32), nullable=True),
        sa.Column("completion", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["regrade_job.id"]),
        sa.ForeignKeyConstraint(["grading_id"], ["grading.id"]),
        sa.PrimaryKeyConstraint("custom_id"),
    )
    op.create_index(op.f("ix_regrade_batch_request_job_id"), "regrade_batch_request", ["job_id"])
    op.create_index(
        op.f("ix_regrade_batch_request_grading_id"), "regrade_batch_request", ["grading_id"]
    )
    op.add_column("judge_call", sa.Column("via", sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Drop them."""
    op.drop_column("judge_call", "via")
    op.drop_index(op.f("ix_regrade_batch_request_grading_id"), table_name="regrade_batch_request")
    op.drop_index(op.f("ix_regrade_batch_request_job_id"), table_name="regrade_batch_request")
    op.drop_table("regrade_batch_request")
    op.drop_index(op.f("ix_regrade_batch_job_id"), table_name="regrade_batch")
    op.drop_table("regrade_batch")
    op.drop_index(op.f("ix_regrade_engine_state"), table_name="regrade_engine")
    op.drop_table("regrade_engine")
