"""A webhook delivery's give-up clock starts at its first attempt:
``webhook_delivery.first_attempt_at``.

A failing delivery was given up once it was ``SRE_JUDGE_WEBHOOK_GIVE_UP_SECONDS`` old,
counted from its event (or its redelivery), so one that had waited that long behind an
earlier failing delivery of its endpoint was dead-lettered after a single attempt.
``first_attempt_at`` is set when the first attempt of a series is leased and cleared by
a redelivery. Existing deliveries already tried take the first attempt recorded since
their series began (their ``created_at``: the event, or the last redelivery, which set
it), or ``created_at`` itself when none is recorded yet (a lease in flight): the clock
they were given up by until now.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034"
down_revision: str | None = "0033"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_FIRST_ATTEMPT = sa.text(
    """
    UPDATE webhook_delivery SET first_attempt_at = COALESCE(
        (SELECT MIN(a.attempted_at) FROM webhook_attempt a
         WHERE a.delivery_seq = webhook_delivery.seq
           AND a.attempted_at >= webhook_delivery.created_at),
        webhook_delivery.created_at)
    WHERE attempts > 0
    """
)


def upgrade() -> None:
    """Add the column (ALTER TABLE ... ADD COLUMN: no table rebuild on SQLite) and fill
    it in for the deliveries already tried."""
    op.add_column("webhook_delivery", sa.Column("first_attempt_at", sa.DateTime(timezone=True)))
    op.execute(_FIRST_ATTEMPT)


def downgrade() -> None:
    """Drop it (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite)."""
    op.drop_column("webhook_delivery", "first_attempt_at")
