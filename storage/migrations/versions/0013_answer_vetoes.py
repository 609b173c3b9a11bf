"""Answers record their quote check and the check in code that vetoed or flagged them.

``answer.evidence_check`` is the quote check's outcome (``found``, ``empty``,
``too_short``, ``not_found``, ``injected``) and ``answer.veto`` the check that vetoed or
flagged the judge's yes with its reason (``{"check", "effect", "reason"}``). Both are
null for answers stored before: their reasons stay in the grading's ``detail``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the two nullable columns."""
    with op.batch_alter_table("answer") as batch:
        batch.add_column(sa.Column("evidence_check", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("veto", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("answer") as batch:
        batch.drop_column("veto")
        batch.drop_column("evidence_check")
