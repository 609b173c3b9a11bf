"""A grading's place in the list of gradings: ``grading.listed_at``.

``GET /v1/gradings`` lists gradings newest first and pages by keyset on the grading's
``(created_at, id)``. A promoted regrade makes a new grading current, created when its
job was: the submission's current grading moved to a newer place, so a client paging
through the list past that place never reached it (and the grading it had not reached
yet was no longer current): the submission was left out. The list now orders by
``listed_at``, the grading's ``created_at`` unless it is a promoted regrade item, which
takes the place of the grading it replaced. Existing gradings are listed at their
creation time, as before; ``(listed_at, id)`` is indexed in the list's order. The
column is outside the audit digest (``storage.audit.state``): older rows' digests are
unchanged.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0036"
down_revision: str | None = "0035"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


#: the queue's claim-order index (0022) is on an expression, which SQLite's table
#: rebuild cannot reflect: it is made again after the rebuild
_CLAIM_ORDER = "ix_grading_claim_order"


def upgrade() -> None:
    """Add the column, fill it in with each grading's creation time, then make it NOT
    NULL and index it. SQLite rebuilds the table for NOT NULL; the claim-order index is
    made again after it."""
    op.add_column("grading", sa.Column("listed_at", sa.DateTime(timezone=True), nullable=True))
    op.execute(sa.text("UPDATE grading SET listed_at = created_at"))
    sqlite = op.get_bind().dialect.name == "sqlite"
    if sqlite:
        op.drop_index(_CLAIM_ORDER, table_name="grading")
    with op.batch_alter_table("grading") as batch:
        batch.alter_column("listed_at", existing_type=sa.DateTime(timezone=True), nullable=False)
    if sqlite:
        op.create_index(
            _CLAIM_ORDER,
            "grading",
            ["status", sa.text("(regrade_job_id IS NOT NULL)"), "created_at", "id"],
        )
    op.create_index("ix_grading_listed_at_id", "grading", ["listed_at", "id"])


def downgrade() -> None:
    """Drop the index and the column (ALTER TABLE ... DROP COLUMN: no rebuild on SQLite);
    the list orders by creation time again."""
    op.drop_index("ix_grading_listed_at_id", table_name="grading")
    op.drop_column("grading", "listed_at")
