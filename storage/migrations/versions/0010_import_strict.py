"""Import jobs remember ``strict``: JSON lines imported all or nothing, as the CLI's flag.

``import_job.strict`` (false for existing jobs): a strict job that finds a bad line
stores nothing and fails, its rows refused listed in ``errors``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column."""
    with op.batch_alter_table("import_job") as batch:
        batch.add_column(
            sa.Column("strict", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table("import_job") as batch:
        batch.drop_column("strict")
