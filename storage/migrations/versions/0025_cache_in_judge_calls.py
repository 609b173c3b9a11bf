"""The judge cache is kept in the judge calls: ``judge_call.cache_key``.

A judge call whose reply the cache keeps now carries the entry's key, so a grading
stores its reply once (in its call) instead of once more in ``judge_cache``, in one
statement fewer. The ``judge_cache`` table stays: its entries, made before this
revision, are still read (``storage.judge_cache``) and no longer written. Existing calls
keep a null key (their replies that the cache kept are in ``judge_cache``).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql, sqlite

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable key (no table rebuild on SQLite) and its index."""
    op.add_column("judge_call", sa.Column("cache_key", sa.String(length=64)))
    op.create_index("ix_judge_call_cache_key", "judge_call", ["cache_key"])


#: the columns of a ``judge_cache`` entry, and the ``judge_call`` columns holding them
_ENTRY = {
    "key": "cache_key",
    "backend": "backend",
    "model": "model",
    "completion_text": "response_text",
    "response_model": "response_model",
    "fingerprint": "fingerprint",
    "response_format": "response_format",
    "prompt_tokens": "prompt_tokens",
    "completion_tokens": "completion_tokens",
    "created_at": "created_at",
}


def downgrade() -> None:
    """Copy the entries the calls keep into ``judge_cache`` (the oldest call under a key
    wins, as an entry there is never replaced), then drop the index and the key."""
    bind = op.get_bind()
    calls = sa.table("judge_call", *map(sa.column, [*_ENTRY.values(), "position"]))
    cache = sa.table("judge_cache", *map(sa.column, _ENTRY))
    kept = (
        sa.select(*(calls.c[name] for name in _ENTRY.values()))
        .where(calls.c.cache_key.is_not(None))
        .order_by(calls.c.created_at, calls.c.position)
    )
    dialect = postgresql if bind.dialect.name == "postgresql" else sqlite
    bind.execute(dialect.insert(cache).from_select(list(_ENTRY), kept).on_conflict_do_nothing())
    op.drop_index("ix_judge_call_cache_key", table_name="judge_call")
    op.drop_column("judge_call", "cache_key")
