"""SREGym's original rows: one per file and line, several per submission.

SREGym writes each attempt in several files (alone in ``run_<n>/<pid>_results.csv``, in
its problem's ``<pid>_<agent>_results.csv``, in ``<agent>_ALL_results.csv``); the
export gives every file back only if each row read is kept. The primary key becomes
``(submission_id, path, line)``: every existing row (one per submission) stays valid.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0031"
down_revision: str | None = "0030"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Widen the primary key (a table rebuild on SQLite, in batch mode)."""
    with op.batch_alter_table("sregym_original_row") as batch:
        batch.drop_constraint("pk_sregym_original_row", type_="primary")
        batch.create_primary_key("pk_sregym_original_row", ["submission_id", "path", "line"])


def downgrade() -> None:
    """Keep the first row of each submission (by file, then line), then narrow the key."""
    op.execute(
        "DELETE FROM sregym_original_row WHERE EXISTS (SELECT 1 FROM sregym_original_row AS o "
        "WHERE o.submission_id = sregym_original_row.submission_id AND (o.path < "
        "sregym_original_row.path OR (o.path = sregym_original_row.path AND o.line < "
        "sregym_original_row.line)))"
    )
    with op.batch_alter_table("sregym_original_row") as batch:
        batch.drop_constraint("pk_sregym_original_row", type_="primary")
        batch.create_primary_key("pk_sregym_original_row", ["submission_id"])
