"""Imports: SREGym's original rows, import jobs and their uploads.

Revision ID: 0009
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _at(name: str, *, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    """Create the three tables."""
    op.create_table(
        "sregym_original_row",
        sa.Column("submission_id", sa.String(32), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("line", sa.Integer(), nullable=False),
        sa.Column("columns", sa.JSON(), nullable=False),
        sa.Column("cells", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("submission_id", name="pk_sregym_original_row"),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submission.id"],
            name="fk_sregym_original_row_submission_id_submission",
            ondelete="CASCADE",
        ),
    )
    op.create_table(
        "import_job",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("archive", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("rubric", sa.String(200), nullable=True),
        sa.Column("total", sa.Integer(), nullable=True),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("report", sa.JSON(), nullable=False),
        sa.Column("errors", sa.JSON(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("claimed_by", sa.String(64), nullable=True),
        _at("heartbeat_at", nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        _at("created_at"),
        _at("started_at", nullable=True),
        _at("finished_at", nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_import_job"),
    )
    op.create_table(
        "import_upload",
        sa.Column("job_id", sa.String(32), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="pk_import_upload"),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["import_job.id"],
            name="fk_import_upload_job_id_import_job",
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table("import_upload")
    op.drop_table("import_job")
    op.drop_table("sregym_original_row")
