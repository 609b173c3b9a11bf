"""An index for counting a token's attempts on a scenario.

A submitter's attempts on a registered scenario within the hour are counted in the
transaction that stores its next submission (on SQLite, under the database's one write
lock). Without an index on the token, the scenario and the time, that count read every
submission of the scenario or of the token; ``ix_submission_attempts`` makes it a range
of the hour's few rows.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the index."""
    op.create_index(
        "ix_submission_attempts", "submission", ["submitted_by", "scenario_id", "created_at"]
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_index("ix_submission_attempts", table_name="submission")
