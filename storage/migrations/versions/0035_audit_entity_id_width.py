"""An audit event's ``entity_id`` holds 512 characters, as a judge's name does.

The judge events (``canary.scheduled``, ``canary.completed``, ``judge.demoted``,
``judge.changed``) name their judge as ``backend:model``, and a model name may be 256
characters long: ``audit_log.entity_id`` (160) refused such a judge's events on
PostgreSQL, failing its canary runs and the record of its model changes. It now holds
512, the width of ``judge_spec`` wherever a judge is named. Stored rows are unchanged
(their hashes still verify); SQLite rebuilds the table to change the declared type.

Revision ID: 0035
Revises: 0034
Create Date: 2026-12-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0035"
down_revision: str | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Widen the column (PostgreSQL: no rewrite of the table or its index)."""
    with op.batch_alter_table("audit_log") as batch:
        batch.alter_column(
            "entity_id", type_=sa.String(length=512), existing_type=sa.String(length=160)
        )


def downgrade() -> None:
    """Narrow it back; refused while an event names an entity longer than 160
    characters (the audit chain covers it: it cannot be cut)."""
    longer = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM audit_log WHERE LENGTH(entity_id) > 160")
    )
    count = longer.scalar_one()
    if count:
        raise RuntimeError(
            f"revision 0034 cannot hold the audit log: {count} of its events name an "
            "entity longer than 160 characters"
        )
    with op.batch_alter_table("audit_log") as batch:
        batch.alter_column(
            "entity_id", type_=sa.String(length=160), existing_type=sa.String(length=512)
        )
