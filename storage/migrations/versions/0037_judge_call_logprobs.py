"""A judge cache entry keeps the log-probabilities its confidences are read from.

An answer's confidence is read from the log-probabilities of the reply's answer tokens
where the judge returned them (``judge.confidence``); a reply served from the judge
cache is an entry's ``judge_call`` row, which kept the reply's text but not those, so
the replay fell back to the judge's stated confidence. ``judge_call.logprobs`` holds
what the confidences are read from (``judge.confidence.confidence_tokens``: the answer
tokens and the text between them) on the calls that are cache entries. Null for the
calls stored before, whose replays give the stated confidence as they did. A null
column is outside the audit digest (``storage.audit.records``): older rows' digests are
unchanged.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0037"
down_revision: str | None = "0036"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable column (ALTER TABLE ... ADD COLUMN: no rebuild on SQLite)."""
    op.add_column("judge_call", sa.Column("logprobs", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    """Drop the column (ALTER TABLE ... DROP COLUMN, again no rebuild on SQLite); refused
    while a judge call holds log-probabilities (the audit chain covers the calls' rows:
    they cannot be cut)."""
    held = op.get_bind().execute(
        sa.text("SELECT COUNT(*) FROM judge_call WHERE logprobs IS NOT NULL")
    )
    count = held.scalar_one()
    if count:
        raise RuntimeError(
            f"revision 0036 cannot hold the judge calls: {count} of them keep the "
            "log-probabilities of their replies, which the audit log covers"
        )
    op.drop_column("judge_call", "logprobs")
