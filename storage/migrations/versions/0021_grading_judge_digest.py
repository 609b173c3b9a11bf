"""A grading keeps the digest of the model behind its judge's name when it graded.

``grading.judge_digest`` (nullable: gradings made before, or by a judge that reports no
digest, have none), so that reports can tell apart two models behind one name.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable column (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)."""
    op.add_column("grading", sa.Column("judge_digest", sa.String(length=512), nullable=True))


def downgrade() -> None:
    """Drop the column (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite); refused
    while a grading holds a digest (the audit chain covers it: it cannot be cut)."""
    digests = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM grading WHERE judge_digest IS NOT NULL")
    )
    count = digests.scalar_one()
    if count:
        raise RuntimeError(
            f"revision 0020 cannot hold the gradings: {count} of them record their "
            "judge's model digest, which the audit log covers"
        )
    op.drop_column("grading", "judge_digest")
