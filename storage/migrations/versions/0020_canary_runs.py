"""Drift canary runs: a judge's agreement on a labelled canary set, run after run.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``canary_run``."""
    op.create_table(
        "canary_run",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("judge_spec", sa.String(length=512), nullable=False),
        sa.Column("judge_digest", sa.String(length=256), nullable=True),
        sa.Column("rubric_version", sa.String(length=64), nullable=False),
        sa.Column("asking_mode", sa.String(length=16), nullable=False),
        sa.Column("set_name", sa.String(length=256), nullable=False),
        sa.Column("set_sha256", sa.String(length=64), nullable=False),
        sa.Column("calibration_run_id", sa.String(length=32), nullable=True),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("scored", sa.Integer(), nullable=False),
        sa.Column("judge_calls", sa.Integer(), nullable=False),
        sa.Column("budget", sa.Integer(), nullable=False),
        sa.Column("verdict_accuracy", sa.Float(), nullable=True),
        sa.Column("verdict_kappa", sa.Float(), nullable=True),
        sa.Column("changed_share", sa.Float(), nullable=True),
        sa.Column("demoted", sa.Boolean(), nullable=False),
        sa.Column("reasons", sa.JSON(), nullable=False),
        sa.Column("figures", sa.JSON(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_canary_run")),
    )
    op.create_index(
        "ix_canary_run_judge_spec_created_at", "canary_run", ["judge_spec", "created_at"]
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_canary_run_judge_spec_created_at", table_name="canary_run")
    op.drop_table("canary_run")
