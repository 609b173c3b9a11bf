"""Indexes that answer a regrade job's progress from the indexes alone.

A job's progress counts its items by status and its judge calls by origin with their
tokens; with the items' job and status in one index and the calls' grading, origin
and tokens in another, neither count reads a table row (a judge call row holds the
whole prompt). Each new index starts with the column of the index it replaces.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CALL_COLUMNS = ["grading_id", "cached", "prompt_tokens", "completion_tokens"]


def upgrade() -> None:
    """Replace the two one-column indexes by covering ones."""
    op.create_index("ix_grading_regrade_job_id_status", "grading", ["regrade_job_id", "status"])
    op.drop_index(op.f("ix_grading_regrade_job_id"), table_name="grading")
    op.create_index("ix_judge_call_grading_id_cached", "judge_call", _CALL_COLUMNS)
    op.drop_index(op.f("ix_judge_call_grading_id"), table_name="judge_call")


def downgrade() -> None:
    """Put the one-column indexes back."""
    op.create_index(op.f("ix_judge_call_grading_id"), "judge_call", ["grading_id"])
    op.drop_index("ix_judge_call_grading_id_cached", table_name="judge_call")
    op.create_index(op.f("ix_grading_regrade_job_id"), "grading", ["regrade_job_id"])
    op.drop_index("ix_grading_regrade_job_id_status", table_name="grading")
