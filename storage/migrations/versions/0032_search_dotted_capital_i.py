"""Search folds the dotted capital I (``İ``) as PostgreSQL does, on SQLite too.

FTS5's ``unicode61`` tokenizer keeps ``İ`` (U+0130) as a letter of its own, so on SQLite
``istanbul`` did not find "İstanbul" while PostgreSQL (which lowers ``İ`` to ``i``) did.
The index now receives each text with ``İ`` written ``I``, which the tokenizer folds to
``i``; the query is written the same way (``storage.search``). The SQLite triggers are
recreated with that form and the index is filled again from the stored rows.
PostgreSQL is unchanged.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (table, text column, doc key prefix, submission id, grading id, extra condition), as
#: migration 0014 indexes them
_SOURCES = (
    ("submission", "diagnosis", "s:", "{row}.id", "NULL", "1"),
    ("override", "reason", "o:", "NULL", "{row}.grading_id", "1"),
    ("failure_tag", "note", "t:", "NULL", "{row}.grading_id", "{row}.removed_at IS NULL"),
)


def _insert(source: tuple[str, ...], row: str, *, folded: bool) -> str:
    table, column, prefix, sub, grading, cond = source
    body = f"replace({row}.{column}, 'İ', 'I')" if folded else f"{row}.{column}"
    return (
        "INSERT INTO search_text (body, doc, submission_id, grading_id) "
        f"SELECT {body}, '{prefix}' || {row}.id, {sub.format(row=row)}, "
        f"{grading.format(row=row)} "
        + (f"FROM {table} AS {row} " if row == "r" else "")
        + f"WHERE {row}.{column} <> '' AND {cond.format(row=row)}"
    )


def _rebuild(*, folded: bool) -> None:
    """Drop the triggers, refill the index from the rows, create the triggers again."""
    for table, *_ in _SOURCES:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER IF EXISTS search_{table}_{event}")
    op.execute("DELETE FROM search_text")
    for source in _SOURCES:
        op.execute(_insert(source, "r", folded=folded))
    for source in _SOURCES:
        table, column, prefix = source[:3]
        insert = _insert(source, "new", folded=folded)
        delete = f"DELETE FROM search_text WHERE doc = '{prefix}' || old.id"
        watched = f"{column}, removed_at" if table == "failure_tag" else column
        op.execute(
            f"CREATE TRIGGER search_{table}_insert AFTER INSERT ON {table} BEGIN {insert}; END"
        )
        op.execute(
            f"CREATE TRIGGER search_{table}_update AFTER UPDATE OF {watched} ON {table} "
            f"BEGIN {delete}; {insert}; END"
        )
        op.execute(
            f"CREATE TRIGGER search_{table}_delete AFTER DELETE ON {table} BEGIN {delete}; END"
        )


def upgrade() -> None:
    """SQLite: index every text with ``İ`` written ``I``."""
    if op.get_context().dialect.name == "sqlite":
        _rebuild(folded=True)


def downgrade() -> None:
    """SQLite: index the texts as written again."""
    if op.get_context().dialect.name == "sqlite":
        _rebuild(folded=False)
