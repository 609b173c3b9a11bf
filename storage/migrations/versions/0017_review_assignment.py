"""Review claims say who skipped an item (with an optional note) and who it is assigned to.

``review_claim`` gains the last skip (who, their name, when, the note other adjudicators
read on the queue and the grading page) and the assignment (the adjudicator's token id
and name, who assigned it and when). Every skip and (un)assignment is also an audit
event; the columns hold the latest state only.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    ("skipped_at", sa.DateTime(timezone=True)),
    ("skipped_by", sa.String(length=64)),
    ("skipped_by_name", sa.String(length=256)),
    ("skip_note", sa.Text()),
    ("assigned_to", sa.String(length=64)),
    ("assigned_to_name", sa.String(length=256)),
    ("assigned_by", sa.String(length=64)),
    ("assigned_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    """Add the nullable columns (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)
    and an index for "assigned to me"."""
    for name, kind in _COLUMNS:
        op.add_column("review_claim", sa.Column(name, kind, nullable=True))
    op.create_index(op.f("ix_review_claim_assigned_to"), "review_claim", ["assigned_to"])


def downgrade() -> None:
    """Drop them (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite)."""
    op.drop_index(op.f("ix_review_claim_assigned_to"), table_name="review_claim")
    for name, _ in reversed(_COLUMNS):
        op.drop_column("review_claim", name)
