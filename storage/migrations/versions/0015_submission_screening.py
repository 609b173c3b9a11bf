"""Submissions keep their screening: review reasons, notes and injected spans.

``submission.screening`` is what screening the diagnosis at intake found
(``judge.screening.Screening.record``), so gradings and regrades of the submission reuse
it instead of screening again. Null for submissions stored before, and for imports
screened at grading time.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable column (ALTER TABLE ... ADD COLUMN: on SQLite the table is not
    rebuilt, so the search triggers of 0014 stay)."""
    op.add_column("submission", sa.Column("screening", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop it (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite)."""
    op.drop_column("submission", "screening")
