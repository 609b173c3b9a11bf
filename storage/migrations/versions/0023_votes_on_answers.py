"""A grading's votes live on its answers, not in a table of their own.

Each answer row gains ``votes``: the judges' and samples' answers to that question, as a
JSON list of ``{"judge_spec", "sample_index", "answer", "confidence", "call_id"}`` in the
order they were cast (null where the grading recorded none). Every reader of votes read
them with the answers they belong to, so the ``judge_vote`` table cost a verdict one
INSERT and every read of a grading one SELECT more than the answers alone. The rows of
``judge_vote`` move onto their answers, in id order, and the table is dropped; the
downgrade moves them back (their ``created_at`` is the grading's ``graded_at``).

Votes stay outside a grading's state digest (``storage.audit.state``), as they were.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import groupby
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: the keys of one vote on an answer, in the order of the old table's columns
_VOTE_KEYS = ("judge_spec", "sample_index", "answer", "confidence", "call_id")
#: answers updated, or vote rows inserted, per executemany
_CHUNK = 1000

_answer = sa.table(
    "answer",
    sa.column("id", sa.Integer()),
    sa.column("grading_id", sa.String()),
    sa.column("question_id", sa.String()),
    sa.column("position", sa.Integer()),
    sa.column("votes", sa.JSON(none_as_null=True)),
)
_grading = sa.table(
    "grading",
    sa.column("id", sa.String()),
    sa.column("graded_at", sa.DateTime(timezone=True)),
    sa.column("created_at", sa.DateTime(timezone=True)),
)


def _vote_columns() -> list[sa.SchemaItem]:
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


def _chunks(rows: Iterator[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def upgrade() -> None:
    """Add ``answer.votes``, move every vote onto its answer, drop ``judge_vote``."""
    op.add_column("answer", sa.Column("votes", sa.JSON(none_as_null=True), nullable=True))
    connection = op.get_bind()
    columns = [sa.column(c.name, c.type) for c in _vote_columns() if isinstance(c, sa.Column)]
    votes = sa.table("judge_vote", *columns)
    read = sa.select(votes).order_by(votes.c.grading_id, votes.c.question_id, votes.c.id)
    rows = connection.execute(read).mappings()

    def answers() -> Iterator[dict[str, Any]]:
        for (grading_id, question_id), cast in groupby(
            rows, key=lambda r: (r["grading_id"], r["question_id"])
        ):
            listed = [{key: vote[key] for key in _VOTE_KEYS} for vote in cast]
            yield {"g": grading_id, "q": question_id, "v": listed}

    change = (
        sa.update(_answer)
        .where(_answer.c.grading_id == sa.bindparam("g"))
        .where(_answer.c.question_id == sa.bindparam("q"))
        .values(votes=sa.bindparam("v", type_=sa.JSON()))
    )
    # read fully first: one connection cannot stream a SELECT while it UPDATEs
    for chunk in list(_chunks(answers())):
        connection.execute(change, chunk)
    op.drop_index("ix_judge_vote_grading_id_question_id", table_name="judge_vote")
    op.drop_table("judge_vote")


def downgrade() -> None:
    """Recreate ``judge_vote`` from the answers' votes, then drop ``answer.votes``."""
    votes = op.create_table("judge_vote", *_vote_columns())
    op.create_index(
        "ix_judge_vote_grading_id_question_id", "judge_vote", ["grading_id", "question_id"]
    )
    connection = op.get_bind()
    read = (
        sa.select(
            _answer.c.grading_id,
            _answer.c.question_id,
            _answer.c.votes,
            sa.func.coalesce(_grading.c.graded_at, _grading.c.created_at).label("at"),
        )
        .join(_grading, _grading.c.id == _answer.c.grading_id)
        .where(_answer.c.votes.is_not(None))
        .order_by(_answer.c.grading_id, _answer.c.position)
    )
    found = connection.execute(read).all()

    def rows() -> Iterator[dict[str, Any]]:
        for grading_id, question_id, cast, at in found:
            for vote in cast or ():
                yield {
                    "grading_id": grading_id,
                    "question_id": question_id,
                    "created_at": at,
                    **{key: vote.get(key) for key in _VOTE_KEYS},
                }

    for chunk in _chunks(rows()):
        connection.execute(sa.insert(votes), chunk)
    with op.batch_alter_table("answer") as batch:
        batch.drop_column("votes")
