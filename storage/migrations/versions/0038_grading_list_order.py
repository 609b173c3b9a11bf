"""The list of gradings is ordered by ``(listed_at, submission_id, id)``, and indexed so.

``GET /v1/gradings`` paged by keyset on ``(listed_at, id)``. A promoted regrade item
takes the ``listed_at`` of the grading it replaced but has an id of its own, so when
the grading a page ended on was replaced, the next page listed its submission again
(when the new id was the smaller) or left out a submission sharing its ``listed_at``.
A submission has one current grading, and its place in the list is now ``(listed_at,
submission_id)``, which a promotion keeps; the grading's id orders the gradings of one
submission where superseded ones are listed too (``storage.gradings.ListPosition``).
``ix_grading_list_order`` replaces ``ix_grading_listed_at_id`` (0036): both databases
read a page as a range of it, in the list's order. No row changes.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-10
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0038"
down_revision: str | None = "0037"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the index in the list's order, then drop the one it replaces (no table
    rebuild on SQLite)."""
    op.create_index("ix_grading_list_order", "grading", ["listed_at", "submission_id", "id"])
    op.drop_index("ix_grading_listed_at_id", table_name="grading")


def downgrade() -> None:
    """Index ``(listed_at, id)`` again, the order the list had, and drop the new one."""
    op.create_index("ix_grading_listed_at_id", "grading", ["listed_at", "id"])
    op.drop_index("ix_grading_list_order", table_name="grading")
