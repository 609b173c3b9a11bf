"""Human review: overrides, human labels, review claims, failure tags and their
vocabulary; grading.overridden; submission.redactions.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _when(name: str, *, nullable: bool) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _string(name: str, length: int, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def _grading_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["grading_id"], ["grading.id"], name=op.f(f"fk_{table}_grading_id_grading")
    )


def upgrade() -> None:
    """Add the review tables and columns."""
    with op.batch_alter_table("grading") as batch:
        batch.add_column(
            sa.Column("overridden", sa.Boolean(), nullable=False, server_default=sa.false())
        )
    with op.batch_alter_table("submission") as batch:
        batch.add_column(
            sa.Column("redactions", sa.JSON(), nullable=False, server_default=sa.text("'[]'"))
        )
    op.create_table(
        "override",
        _string("id", 32),
        _string("grading_id", 32),
        _string("kind", 16),
        _string("question_id", 32, nullable=True),
        sa.Column("answer", sa.Boolean(), nullable=True),
        _string("verdict", 8, nullable=True),
        _string("supersedes", 32, nullable=True),
        _string("withdraws", 32, nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        _string("author_id", 64),
        _string("author_name", 256),
        _when("created_at", nullable=False),
        _grading_fk("override"),
        sa.ForeignKeyConstraint(
            ["supersedes"], ["override.id"], name=op.f("fk_override_supersedes_override")
        ),
        sa.ForeignKeyConstraint(
            ["withdraws"], ["override.id"], name=op.f("fk_override_withdraws_override")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_override")),
    )
    op.create_index(op.f("ix_override_grading_id"), "override", ["grading_id"])
    op.create_table(
        "human_label",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _string("grading_id", 32),
        _string("question_id", 32, nullable=True),
        sa.Column("answer", sa.Boolean(), nullable=True),
        _string("verdict", 8, nullable=True),
        _string("source", 16),
        _string("author_id", 64),
        _string("author_name", 256),
        _when("created_at", nullable=False),
        _grading_fk("human_label"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_human_label")),
    )
    op.create_index(
        "ix_human_label_grading_id_author_id", "human_label", ["grading_id", "author_id"]
    )
    op.create_table(
        "review_claim",
        _string("grading_id", 32),
        _string("claimed_by", 64, nullable=True),
        _string("claimed_by_name", 256, nullable=True),
        _when("claimed_until", nullable=True),
        _when("done_at", nullable=True),
        _string("done_by", 64, nullable=True),
        _grading_fk("review_claim"),
        sa.PrimaryKeyConstraint("grading_id", name=op.f("pk_review_claim")),
    )
    op.create_table(
        "failure_tag",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        _string("grading_id", 32),
        _string("tag", 64),
        sa.Column("note", sa.Text(), nullable=False),
        _string("author_id", 64),
        _string("author_name", 256),
        _when("created_at", nullable=False),
        _when("removed_at", nullable=True),
        _string("removed_by", 64, nullable=True),
        _grading_fk("failure_tag"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_failure_tag")),
    )
    op.create_index(op.f("ix_failure_tag_grading_id"), "failure_tag", ["grading_id"])
    op.create_index(op.f("ix_failure_tag_tag"), "failure_tag", ["tag"])
    op.create_table(
        "tag_vocabulary",
        _string("tag", 64),
        sa.Column("description", sa.Text(), nullable=False),
        _string("source", 16),
        _string("created_by", 64),
        _when("created_at", nullable=False),
        sa.PrimaryKeyConstraint("tag", name=op.f("pk_tag_vocabulary")),
    )


def downgrade() -> None:
    """Drop what upgrade added."""
    for table in ("tag_vocabulary", "failure_tag", "review_claim", "human_label", "override"):
        op.drop_table(table)
    with op.batch_alter_table("submission") as batch:
        batch.drop_column("redactions")
    with op.batch_alter_table("grading") as batch:
        batch.drop_column("overridden")
