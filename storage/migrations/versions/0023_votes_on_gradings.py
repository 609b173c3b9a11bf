"""A grading's votes live on its row, not in a table of their own.

``grading.votes`` holds every vote cast in the grading, in the order cast, as a JSON
list of ``{"judge_spec", "sample_index", "question_id", "answer", "confidence",
"call_id"}`` (null where none was recorded). Every reader read votes with the grading
they belong to, so the ``judge_vote`` table cost each verdict one INSERT and every read
of a grading one SELECT more. The rows of ``judge_vote`` move onto their gradings in id
order, all of them (a panel unscored by one member kept the other members' votes without
answers; they move too), and the table is dropped; the downgrade moves them back (their
``created_at`` is the grading's ``graded_at``).

Votes stay outside a grading's state digest (``storage.audit.state``), as they were.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the keys of one vote on a grading, in the order of the old table's columns
_VOTE_KEYS = ("judge_spec", "sample_index", "question_id", "answer", "confidence", "call_id")
#: gradings whose votes move per round (a few thousand votes)
_PAGE = 500

_grading = sa.table(
    "grading",
    sa.column("id", sa.String()),
    sa.column("votes", sa.JSON(none_as_null=True)),
    sa.column("graded_at", sa.DateTime(timezone=True)),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def _vote_columns() -> list[sa.schema.SchemaItem]:
    """The columns and constraints ``judge_vote`` had (migration 0004)."""
    return [
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("grading_id", sa.String(length=32), nullable=False),
        sa.Column("judge_spec", sa.String(length=512), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=32), nullable=False),
        sa.Column("answer", sa.Boolean(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("call_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["grading_id"], ["grading.id"], name="fk_judge_vote_grading_id_grading"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_judge_vote"),
    ]


def _pages(connection: sa.Connection, column: sa.ColumnClause[str]) -> Iterator[list[str]]:
    """The distinct values of ``column`` (grading ids) in pages of ``_PAGE``, in keyset
    order, so that neither direction holds a whole table in memory."""
    last = ""
    while True:
        query = (
            sa.select(column).where(column > last).group_by(column).order_by(column).limit(_PAGE)
        )
        page = list(connection.execute(query).scalars())
        if not page:
            return
        yield page
        last = page[-1]


def upgrade() -> None:
    """Add ``grading.votes``, move every vote onto its grading, drop ``judge_vote``."""
    op.add_column("grading", sa.Column("votes", sa.JSON(none_as_null=True), nullable=True))
    connection = op.get_bind()
    columns = [sa.column(c.name, c.type) for c in _vote_columns() if isinstance(c, sa.Column)]
    votes = sa.table("judge_vote", *columns)
    change = (
        sa.update(_grading)
        .where(_grading.c.id == sa.bindparam("g"))
        .values(votes=sa.bindparam("v", type_=sa.JSON()))
    )
    for page in _pages(connection, votes.c.grading_id):
        read = (
            sa.select(votes)
            .where(votes.c.grading_id.in_(page))
            .order_by(votes.c.grading_id, votes.c.id)
        )
        rows = connection.execute(read).mappings().all()
        gradings = [
            {"g": grading_id, "v": [{key: vote[key] for key in _VOTE_KEYS} for vote in cast]}
            for grading_id, cast in groupby(rows, key=lambda row: row["grading_id"])
        ]
        connection.execute(change, gradings)
    op.drop_index("ix_judge_vote_grading_id_question_id", table_name="judge_vote")
    op.drop_table("judge_vote")


def downgrade() -> None:
    """Recreate ``judge_vote`` from the gradings' votes, then drop ``grading.votes``."""
    votes = op.create_table("judge_vote", *_vote_columns())
    op.create_index(
        "ix_judge_vote_grading_id_question_id", "judge_vote", ["grading_id", "question_id"]
    )
    connection = op.get_bind()
    voted = _grading.c.votes.is_not(None)
    for page in _pages(connection, _grading.c.id):
        read = sa.select(
            _grading.c.id,
            _grading.c.votes,
            sa.func.coalesce(_grading.c.graded_at, _grading.c.created_at),
        ).where(_grading.c.id.in_(page), voted)
        rows = [
            {
                "grading_id": grading_id,
                "created_at": at,
                **{key: vote.get(key) for key in _VOTE_KEYS},
            }
            for grading_id, cast, at in connection.execute(read)
            for vote in cast or ()
        ]
        if rows:
            connection.execute(sa.insert(votes), rows)
    # a plain DROP COLUMN (SQLite 3.35+): a batch rebuild of the table would lose the
    # claim-order index, whose expression SQLite's reflection cannot read back
    op.drop_column("grading", "votes")
