"""Batch regrading: regrade jobs, the judge cache, grading.regrade_job_id and
grading.previous_grading_id, judge_call.cached.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when(name: str, *, nullable: bool) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _string(name: str, length: int, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def upgrade() -> None:
    """Add the regrade tables and columns."""
    op.create_table(
        "regrade_job",
        _string("id", 32),
        _string("state", 16),
        sa.Column("dry_run", sa.Boolean(), nullable=False),
        sa.Column("filter", sa.JSON(), nullable=False),
        _string("rubric_id", 64),
        _string("rubric_version", 64),
        _string("judge_spec", 512),
        _string("mode", 16),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column("estimate", sa.JSON(), nullable=False),
        _string("created_by", 64),
        _when("created_at", nullable=False),
        _when("started_at", nullable=True),
        _when("finished_at", nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_regrade_job")),
    )
    op.create_table(
        "judge_cache",
        _string("key", 64),
        _string("backend", 32),
        _string("model", 256),
        sa.Column("completion_text", sa.Text(), nullable=False),
        _string("response_model", 256),
        _string("fingerprint", 256, nullable=True),
        _string("response_format", 32, nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        _when("created_at", nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_judge_cache")),
    )
    with op.batch_alter_table("grading") as batch:
        batch.add_column(_string("regrade_job_id", 32, nullable=True))
        batch.add_column(_string("previous_grading_id", 32, nullable=True))
        batch.create_foreign_key(
            op.f("fk_grading_regrade_job_id_regrade_job"), "regrade_job", ["regrade_job_id"], ["id"]
        )
        batch.create_foreign_key(
            op.f("fk_grading_previous_grading_id_grading"),
            "grading",
            ["previous_grading_id"],
            ["id"],
        )
        batch.create_index(op.f("ix_grading_regrade_job_id"), ["regrade_job_id"])
    with op.batch_alter_table("judge_call") as batch:
        batch.add_column(
            sa.Column("cached", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    """Drop what upgrade added."""
    with op.batch_alter_table("judge_call") as batch:
        batch.drop_column("cached")
    with op.batch_alter_table("grading") as batch:
        batch.drop_index(op.f("ix_grading_regrade_job_id"))
        batch.drop_constraint(op.f("fk_grading_previous_grading_id_grading"), type_="foreignkey")
        batch.drop_constraint(op.f("fk_grading_regrade_job_id_regrade_job"), type_="foreignkey")
        batch.drop_column("previous_grading_id")
        batch.drop_column("regrade_job_id")
    op.drop_table("judge_cache")
    op.drop_table("regrade_job")
