"""An index in the queue's claim order, so a claim reads the rows it leases and no more.

The queue claims pending gradings live ones first, then oldest first (``ORDER BY
regrade_job_id IS NOT NULL, created_at, id``: ``storage.claims``). No index had that
order, so each claim read and sorted every pending grading with its submission: under a
backlog of N pending gradings, a claim cost O(N) and draining it O(N^2). With an index on
``(status, (regrade_job_id IS NOT NULL), created_at, id)`` both SQLite and PostgreSQL walk
the pending gradings in claim order and stop at the claim's limit.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the index (no table rebuild on SQLite)."""
    op.create_index(
        "ix_grading_claim_order",
        "grading",
        ["status", sa.text("(regrade_job_id IS NOT NULL)"), "created_at", "id"],
    )


def downgrade() -> None:
    """Drop the index."""
    op.drop_index("ix_grading_claim_order", table_name="grading")
