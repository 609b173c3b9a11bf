"""An override a regrade carried names the override it was copied from.

``override.carried_from`` is the id of the override a regrade copied onto its new
grading (null for one a human made). Withdrawing a carried copy takes back the human
label its original recorded (on the grading the human judged): before, a withdrawal on
the new grading left the human's label counting in judge-human agreement. Copies made
before keep a null here (their audited state has no such column, and writing it would
break their digests); the withdrawal finds their original from the reason the regrade
gave them ("carried by regrade job J from override O: ...").

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)."""
    op.add_column("override", sa.Column("carried_from", sa.String(32)))


def downgrade() -> None:
    """Drop it; refused while an override carries one (the audit chain covers it: it
    cannot be cut)."""
    carried = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM override WHERE carried_from IS NOT NULL")
    )
    count = carried.scalar_one()
    if count:
        raise RuntimeError(
            f"revision 0028 cannot hold the overrides: {count} of them were carried by a "
            "regrade and name their origin, which the audit log covers"
        )
    op.drop_column("override", "carried_from")
