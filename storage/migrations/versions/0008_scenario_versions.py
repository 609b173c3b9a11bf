"""Scenarios as a dataset: versioned ground truth and scenario sets.

- ``scenario_version``: every version of a scenario's ground truth, kept whole; each
  existing scenario gets its version 1 (its current ground truth).
- ``scenario.version`` (the newest version, 1 for existing rows), ``scenario.scenario_set``
  (existing rows in ``default``) and ``scenario.updated_at``.
- ``submission.scenario_version`` and ``grading.scenario_version``: the version graded
  against; 1 for existing rows of registered scenarios graded against the scenario's
  text, NULL for inline ground truths and for rows graded against another text (an
  SREGym import of a registered problem kept its problems file's ground truth).
- ``regrade_job.ground_truth``: ``as_submitted`` (existing jobs) or ``latest``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the version table, add the columns, make existing rows version 1."""
    op.create_table(
        "scenario_version",
        sa.Column("scenario_id", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("ground_truth", sa.Text(), nullable=False),
        sa.Column("note", sa.String(500), nullable=False),
        sa.Column("created_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scenario_id", "version", name="pk_scenario_version"),
        sa.ForeignKeyConstraint(
            ["scenario_id"], ["scenario.id"], name="fk_scenario_version_scenario_id_scenario"
        ),
    )
    with op.batch_alter_table("scenario") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(
            sa.Column("scenario_set", sa.String(64), nullable=False, server_default="default")
        )
        batch.add_column(sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True))
        batch.create_index("ix_scenario_scenario_set", ["scenario_set"])
    for table in ("submission", "grading"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("scenario_version", sa.Integer(), nullable=True))
    with op.batch_alter_table("regrade_job") as batch:
        batch.add_column(
            sa.Column("ground_truth", sa.String(16), nullable=False, server_default="as_submitted")
        )
    op.execute(
        "INSERT INTO scenario_version (scenario_id, version, ground_truth, note, created_by, "
        "created_at) SELECT id, 1, ground_truth, '', created_by, created_at FROM scenario"
    )
    op.execute(
        "UPDATE submission SET scenario_version = 1 WHERE scenario_id IS NOT NULL AND "
        "ground_truth = (SELECT ground_truth FROM scenario "
        "WHERE scenario.id = submission.scenario_id)"
    )
    op.execute(
        "UPDATE grading SET scenario_version = 1 WHERE submission_id IN "
        "(SELECT id FROM submission WHERE scenario_version = 1)"
    )


def downgrade() -> None:
    """Drop what upgrade added (the versions beyond each scenario's newest are lost)."""
    with op.batch_alter_table("regrade_job") as batch:
        batch.drop_column("ground_truth")
    for table in ("grading", "submission"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("scenario_version")
    with op.batch_alter_table("scenario") as batch:
        batch.drop_index("ix_scenario_scenario_set")
        batch.drop_column("updated_at")
        batch.drop_column("scenario_set")
        batch.drop_column("version")
    op.drop_table("scenario_version")
