"""Submissions keep the agent's trace: its tool calls and observations.

``submission.trace`` is the trace sent with a submission or imported with SREGym
results (``judge.trace.Trace``: free text, or a JSON list of steps), its credentials
redacted. Null for submissions stored before, and for those sent without one.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable column (ALTER TABLE ... ADD COLUMN, not batch mode: on SQLite a
    batch rebuild of ``submission`` would drop the search triggers of 0014)."""
    op.add_column("submission", sa.Column("trace", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop it (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite)."""
    op.drop_column("submission", "trace")
