"""A webhook delivery being sent says so: ``webhook_delivery.leased_until``.

A delivery's lease was its ``next_attempt_at`` alone, which a delivery waiting for its
retry has too. So a redelivery of one being sent made it due at once (a second server
sent it while the first send was in flight), and a redelivery of an older one made that
one the endpoint's head while the next was being sent (two sends to one endpoint at
once). ``leased_until`` is set while a server sends the delivery and cleared when the
attempt is recorded; an endpoint with a delivery under a lease is not due. Existing
deliveries start with none.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the column (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite)."""
    op.add_column("webhook_delivery", sa.Column("leased_until", sa.DateTime(timezone=True)))


def downgrade() -> None:
    """Drop it."""
    op.drop_column("webhook_delivery", "leased_until")
