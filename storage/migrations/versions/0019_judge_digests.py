"""Judge identity with the model digest behind the name.

``judge_digest`` keeps every digest first seen behind a judge's name (and whether it
replaced another: the judge changed); ``calibration_run.judge_digest`` the digest a run
measured, so a qualification holds for that model only.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``judge_digest``; add the nullable ``calibration_run.judge_digest``."""
    op.create_table(
        "judge_digest",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("judge_spec", sa.String(length=512), nullable=False),
        sa.Column("digest", sa.String(length=256), nullable=False),
        sa.Column("previous_digest", sa.String(length=256), nullable=True),
        sa.Column("changed", sa.Boolean(), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_digest")),
    )
    op.create_index("ix_judge_digest_judge_spec_id", "judge_digest", ["judge_spec", "id"])
    op.add_column(
        "calibration_run", sa.Column("judge_digest", sa.String(length=256), nullable=True)
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_column("calibration_run", "judge_digest")
    op.drop_index("ix_judge_digest_judge_spec_id", table_name="judge_digest")
    op.drop_table("judge_digest")
