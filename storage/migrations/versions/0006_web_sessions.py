"""Workbench sessions: a browser signed in with an API token.

Only the SHA-256 of the session cookie is stored, beside the token it was opened with
(revoking the token ends its sessions) and the session's CSRF token.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``web_session``."""
    op.create_table(
        "web_session",
        sa.Column("id_hash", sa.String(length=64), nullable=False),
        sa.Column("token_id", sa.String(length=32), nullable=False),
        sa.Column("csrf", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["token_id"], ["api_token.id"], name=op.f("fk_web_session_token_id_api_token")
        ),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_web_session")),
    )
    with op.batch_alter_table("web_session") as batch:
        batch.create_index(batch.f("ix_web_session_token_id"), ["token_id"], unique=False)


def downgrade() -> None:
    """Drop ``web_session`` (everyone signs in again)."""
    with op.batch_alter_table("web_session") as batch:
        batch.drop_index(batch.f("ix_web_session_token_id"))
    op.drop_table("web_session")
