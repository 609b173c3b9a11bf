"""A failed regrade batch request keeps the id of the result that failed it.

``regrade_batch_request.result_id`` is the ``id`` of the result line whose failure is
kept (``batch_req_...`` from OpenAI, ``vllm-...`` from ``vllm run-batch``), so the same
results file imported again counts that line as a duplicate rather than as a new
failure (which used up a retry round, or was refused once the job took no more
results). Existing rows have none: their failures count as before.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0033"
down_revision: str | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column (nullable: ALTER TABLE ... ADD COLUMN, no table rebuild on SQLite)."""
    op.add_column(
        "regrade_batch_request", sa.Column("result_id", sa.String(length=128), nullable=True)
    )


def downgrade() -> None:
    """Drop it (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite)."""
    op.drop_column("regrade_batch_request", "result_id")
