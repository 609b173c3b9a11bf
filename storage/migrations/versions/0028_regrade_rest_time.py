"""A regrade job's rate leaves out the time it rested (paused or cancelled).

``regrade_job.rested_seconds`` sums the time the job spent paused or cancelled after it
started, and ``regrade_job.rested_since`` is when its current rest began (null while it
runs). The rate and the ETA were the items finished over the whole time since the
start: after an hour's pause a job that grades one item a second was shown to need
hours. Existing jobs start with no rest counted.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add both columns (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)."""
    op.add_column(
        "regrade_job",
        sa.Column("rested_seconds", sa.Float(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column("regrade_job", sa.Column("rested_since", sa.DateTime(timezone=True)))


def downgrade() -> None:
    """Drop them."""
    op.drop_column("regrade_job", "rested_since")
    op.drop_column("regrade_job", "rested_seconds")
