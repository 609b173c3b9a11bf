"""Judge quality: votes of samples and panels, calibration runs, grading.provisional.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the quality tables and the provisional flag."""
    with op.batch_alter_table("grading") as batch:
        batch.add_column(
            sa.Column("provisional", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    op.create_table(
        "judge_vote",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("grading_id", sa.String(length=32), nullable=False),
        sa.Column("judge_spec", sa.String(length=512), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=32), nullable=False),
        sa.Column("answer", sa.Boolean(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("call_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["grading_id"], ["grading.id"], name=op.f("fk_judge_vote_grading_id_grading")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_vote")),
    )
    op.create_index(
        "ix_judge_vote_grading_id_question_id", "judge_vote", ["grading_id", "question_id"]
    )
    op.create_table(
        "calibration_run",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("judge_spec", sa.String(length=512), nullable=False),
        sa.Column("judge_settings", sa.JSON(), nullable=False),
        sa.Column("rubric_id", sa.String(length=64), nullable=False),
        sa.Column("rubric_version", sa.String(length=64), nullable=False),
        sa.Column("asking_mode", sa.String(length=16), nullable=False),
        sa.Column("gold_name", sa.String(length=256), nullable=False),
        sa.Column("gold_sha256", sa.String(length=64), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("verdict_kappa", sa.Float(), nullable=True),
        sa.Column("false_pass_rate", sa.Float(), nullable=True),
        sa.Column("qualified", sa.Boolean(), nullable=False),
        sa.Column("results", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibration_run")),
    )
    op.create_index(op.f("ix_calibration_run_judge_spec"), "calibration_run", ["judge_spec"])
    op.create_index(op.f("ix_calibration_run_gold_sha256"), "calibration_run", ["gold_sha256"])


def downgrade() -> None:
    """Drop what upgrade added."""
    op.drop_table("calibration_run")
    op.drop_table("judge_vote")
    with op.batch_alter_table("grading") as batch:
        batch.drop_column("provisional")
