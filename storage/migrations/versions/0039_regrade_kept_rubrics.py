"""A regrade job may name no rubric: its items each keep their submission's.

``regrade_job.rubric_id`` and ``rubric_version`` are null for a job that names no
rubric (a new judge, or the newest ground truths, alone): each item is graded with the
current version of the rubric its submission was graded with, stored on the item (a
grading) as every grading's rubric is. Before, such a job graded every item with the
service's default rubric. Stored jobs keep their rubric; SQLite rebuilds the table to
drop the NOT NULL.

Revision ID: 0039
Revises: 0038
Create Date: 2026-12-11
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0039"
down_revision: str | None = "0038"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = ("rubric_id", "rubric_version")


def upgrade() -> None:
    """Let both columns be null (PostgreSQL: no rewrite of the table)."""
    with op.batch_alter_table("regrade_job") as batch:
        for name in _COLUMNS:
            batch.alter_column(name, existing_type=sa.String(length=64), nullable=True)


def downgrade() -> None:
    """Make them required again; refused while a job names no rubric (revision 0038
    would read it as one graded with a rubric it never named)."""
    kept = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM regrade_job WHERE rubric_id IS NULL")
    )
    count = kept.scalar_one()
    if count:
        raise RuntimeError(
            f"revision 0038 cannot hold the regrade jobs: {count} of them name no rubric "
            "(each item kept its submission's)"
        )
    with op.batch_alter_table("regrade_job") as batch:
        for name in _COLUMNS:
            batch.alter_column(name, existing_type=sa.String(length=64), nullable=False)
