"""Webhooks: endpoints, the outbox of deliveries, delivery attempts.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BIG = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _at(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    """Create the three tables."""
    op.create_table(
        "webhook_endpoint",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("description", sa.String(500), nullable=False),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        _at("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_endpoint"),
    )
    op.create_table(
        "webhook_delivery",
        sa.Column("seq", _BIG, autoincrement=True, nullable=False),
        sa.Column("id", sa.String(40), nullable=False),
        sa.Column("endpoint_id", sa.String(32), nullable=False),
        sa.Column("event", sa.String(64), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        _at("next_attempt_at", nullable=True),
        _at("delivered_at", nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.String(500), nullable=True),
        _at("created_at"),
        sa.PrimaryKeyConstraint("seq", name="pk_webhook_delivery"),
        sa.UniqueConstraint("id", name="uq_webhook_delivery_id"),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["webhook_endpoint.id"],
            name="fk_webhook_delivery_endpoint_id_webhook_endpoint",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_webhook_delivery_endpoint_id", "webhook_delivery", ["endpoint_id"])
    op.create_index("ix_webhook_delivery_due", "webhook_delivery", ["state", "next_attempt_at"])
    op.create_table(
        "webhook_attempt",
        sa.Column("id", _BIG, autoincrement=True, nullable=False),
        sa.Column("delivery_seq", _BIG, nullable=False),
        _at("attempted_at"),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(500), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_webhook_attempt"),
        sa.ForeignKeyConstraint(
            ["delivery_seq"],
            ["webhook_delivery.seq"],
            name="fk_webhook_attempt_delivery_seq_webhook_delivery",
            ondelete="CASCADE",
        ),
    )
    op.create_index("ix_webhook_attempt_delivery_seq", "webhook_attempt", ["delivery_seq"])


def downgrade() -> None:
    """Drop them."""
    op.drop_table("webhook_attempt")
    op.drop_table("webhook_delivery")
    op.drop_table("webhook_endpoint")
