"""A scenario's revision: its ETag changes with every change, not with new versions only.

``scenario.in_place_changes`` counts the changes written in place (a new title, tag
list or set with the same ground truth); ``version`` still counts its ground truths, and
a scenario's revision (its ETag) is their sum: every change moves it by one. The ETag
was the version, so a title or set written in place kept it, and a PUT made from a read
before that change passed ``If-Match`` and silently undid it. Existing scenarios start
at 0 (their ETags do not change, nor their rows' audit digests: a column at its
default is no part of a digest).

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030"
down_revision: str | None = "0029"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)."""
    op.add_column(
        "scenario",
        sa.Column("in_place_changes", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_column("scenario", "in_place_changes")
