"""Webhook endpoints carry a circuit breaker shared by every delivering process.

``webhook_endpoint.consecutive_failures`` (0 for existing endpoints) counts failed
attempts in a row over all of an endpoint's deliveries; ``circuit_open_until`` (null:
closed) is when its deliveries may be attempted again.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the two columns."""
    with op.batch_alter_table("webhook_endpoint") as batch:
        batch.add_column(
            sa.Column("consecutive_failures", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(sa.Column("circuit_open_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table("webhook_endpoint") as batch:
        batch.drop_column("circuit_open_until")
        batch.drop_column("consecutive_failures")
