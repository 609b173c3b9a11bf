"""Ground-truth provenance, inline ground truth per token, held verdicts.

- ``submission.ground_truth_sha256``: which ground truth a submission was graded against
  (a registered scenario's text can change; the hash names the version used).
- ``api_token.inline_ground_truth``: the token may send its own ground truth when the
  deployment's ``SRE_JUDGE_INLINE_GROUND_TRUTH`` is ``per_token``.
- ``grading.held``: a pass by the rule held for a human because the diagnosis carries
  injection markers. Existing passes with ``injection_suspected`` and no override are
  held now (their ``passed`` becomes NULL until an adjudicator decides).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the three columns, fill the hashes, hold the flagged passes."""
    with op.batch_alter_table("submission") as batch:
        batch.add_column(sa.Column("ground_truth_sha256", sa.String(length=64), nullable=True))
    with op.batch_alter_table("api_token") as batch:
        batch.add_column(
            sa.Column(
                "inline_ground_truth", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
    with op.batch_alter_table("grading") as batch:
        batch.add_column(sa.Column("held", sa.Boolean(), nullable=False, server_default=sa.false()))
    _fill_hashes()
    op.execute(
        sa.text(
            "UPDATE grading SET held = :yes, passed = NULL "
            "WHERE passed = :yes AND overridden = :no "
            "AND CAST(review_reasons AS TEXT) LIKE '%\"injection_suspected\"%'"
        ).bindparams(yes=True, no=False)
    )


def _fill_hashes() -> None:
    connection = op.get_bind()
    submission = sa.table(
        "submission",
        sa.column("id", sa.String),
        sa.column("ground_truth", sa.Text),
        sa.column("ground_truth_sha256", sa.String),
    )
    rows = connection.execute(sa.select(submission.c.id, submission.c.ground_truth)).all()
    for row in rows:
        digest = hashlib.sha256(row.ground_truth.encode("utf-8")).hexdigest()
        connection.execute(
            submission.update().where(submission.c.id == row.id).values(ground_truth_sha256=digest)
        )


def downgrade() -> None:
    """Drop the three columns (held passes stay without a verdict)."""
    with op.batch_alter_table("grading") as batch:
        batch.drop_column("held")
    with op.batch_alter_table("api_token") as batch:
        batch.drop_column("inline_ground_truth")
    with op.batch_alter_table("submission") as batch:
        batch.drop_column("ground_truth_sha256")
