"""A regrade batch engine whose step keeps failing waits longer between tries.

``regrade_engine.failures`` counts the engine's steps that failed in a row (0 once a step
succeeds) and ``regrade_engine.retry_at`` is when the runner tries it again (null: at its
next round). Before, a step that failed every time (a file the Batch API refuses, a
revoked key) was tried again every ``SRE_JUDGE_REGRADE_BATCH_POLL_SECONDS`` for ever.
Existing engines start at 0 failures.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add both columns (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)."""
    op.add_column(
        "regrade_engine",
        sa.Column("failures", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column("regrade_engine", sa.Column("retry_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    """Drop them (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite)."""
    op.drop_column("regrade_engine", "retry_at")
    op.drop_column("regrade_engine", "failures")
