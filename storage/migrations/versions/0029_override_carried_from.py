"""An override a regrade carried names the override it was copied from.

``override.carried_from`` is the id of the override a regrade copied onto its new
grading (null for one a human made). Withdrawing a carried copy takes back the human
label its original recorded (on the grading the human judged): before, the copy knew
its source only from its reason's text, and a withdrawal on the new grading left the
human's label counting in judge-human agreement. Copies made before are linked from
that text ("carried by regrade job J from override O: ...").

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0029"
down_revision: str | None = "0028"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the reason a regrade gave its copies (``storage.regrade.carry``)
_COPIED = re.compile(r"carried by regrade job \S+ from override (\w+): ")


def upgrade() -> None:
    """Add the column (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite), and link
    the copies made before from their reasons."""
    op.add_column("override", sa.Column("carried_from", sa.String(32)))
    connection = op.get_bind()
    copies = connection.execute(
        sa.text("SELECT id, reason FROM override WHERE reason LIKE 'carried by regrade job %'")
    )
    links = [
        {"id": row.id, "source": found.group(1)}
        for row in copies
        if (found := _COPIED.match(row.reason)) is not None
    ]
    if links:
        connection.execute(
            sa.text("UPDATE override SET carried_from = :source WHERE id = :id"), links
        )


def downgrade() -> None:
    """Drop it."""
    op.drop_column("override", "carried_from")
