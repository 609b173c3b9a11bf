"""Full-text search of diagnoses, override reasons and failure-tag notes.

SQLite: the FTS5 table ``search_text`` (its own copy of each text, keyed by ``doc``:
``s:``, ``o:`` or ``t:`` and the row's id), kept in step by triggers on ``submission``,
``override`` and ``failure_tag`` (a tag's note only while the tag is in force), filled
here from the rows already stored. The tokenizer keeps diacritics, as PostgreSQL does.
PostgreSQL: a stored generated ``tsvector`` column ``search_document`` beside each text
column, GIN-indexed (an expression index would make every phrase check and every
unselective search parse the text again: 350 ms over 10,000 diagnoses, against a few ms
read from the column). Both read the text with ASCII punctuation as spaces, so the two
split words alike. Autogenerate leaves these to this migration
(``storage.search.include_in_autogenerate``).

A later batch migration that recreates one of these SQLite tables drops its triggers:
it must create them again (``_sqlite_triggers``).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (table, text column, doc key prefix, submission id, grading id, extra condition)
_SOURCES = (
    ("submission", "diagnosis", "s:", "{row}.id", "NULL", "1"),
    ("override", "reason", "o:", "NULL", "{row}.grading_id", "1"),
    ("failure_tag", "note", "t:", "NULL", "{row}.grading_id", "{row}.removed_at IS NULL"),
)
#: the PostgreSQL indexes: name, table, column
_POSTGRES_INDEXES = (
    ("ix_submission_diagnosis_search", "submission", "diagnosis"),
    ("ix_override_reason_search", "override", "reason"),
    ("ix_failure_tag_note_search", "failure_tag", "note"),
)


def _document(column: str) -> str:
    return f"to_tsvector('simple', regexp_replace({column}, '[[:punct:][:space:]]+', ' ', 'g'))"


def _insert(
    table: str, column: str, prefix: str, sub: str, grading: str, cond: str, row: str
) -> str:
    return (
        "INSERT INTO search_text (body, doc, submission_id, grading_id) "
        f"SELECT {row}.{column}, '{prefix}' || {row}.id, {sub.format(row=row)}, "
        f"{grading.format(row=row)} "
        + (f"FROM {table} AS {row} " if row == "r" else "")
        + f"WHERE {row}.{column} <> '' AND {cond.format(row=row)}"
    )


def _sqlite_triggers() -> list[str]:
    statements = []
    for table, column, prefix, sub, grading, cond in _SOURCES:
        insert = _insert(table, column, prefix, sub, grading, cond, "new")
        delete = f"DELETE FROM search_text WHERE doc = '{prefix}' || old.id"
        watched = f"{column}, removed_at" if table == "failure_tag" else column
        statements += [
            f"CREATE TRIGGER search_{table}_insert AFTER INSERT ON {table} BEGIN {insert}; END",
            f"CREATE TRIGGER search_{table}_update AFTER UPDATE OF {watched} ON {table} "
            f"BEGIN {delete}; {insert}; END",
            f"CREATE TRIGGER search_{table}_delete AFTER DELETE ON {table} BEGIN {delete}; END",
        ]
    return statements


def upgrade() -> None:
    """Create the index and fill it from the stored rows."""
    if op.get_context().dialect.name == "postgresql":
        for name, table, column in _POSTGRES_INDEXES:
            op.execute(
                f"ALTER TABLE {table} ADD COLUMN search_document tsvector "
                f"GENERATED ALWAYS AS ({_document(column)}) STORED"
            )
            op.execute(f"CREATE INDEX {name} ON {table} USING gin (search_document)")
        return
    op.execute(
        "CREATE VIRTUAL TABLE search_text USING fts5(body, doc UNINDEXED, "
        "submission_id UNINDEXED, grading_id UNINDEXED, "
        "tokenize = 'unicode61 remove_diacritics 0')"
    )
    for table, column, prefix, sub, grading, cond in _SOURCES:
        op.execute(_insert(table, column, prefix, sub, grading, cond, "r"))
    for statement in _sqlite_triggers():
        op.execute(statement)


def downgrade() -> None:
    """Drop the index."""
    if op.get_context().dialect.name == "postgresql":
        for name, table, _ in _POSTGRES_INDEXES:
            op.execute(f"DROP INDEX {name}")
            op.execute(f"ALTER TABLE {table} DROP COLUMN search_document")
        return
    for table, *_ in _SOURCES:
        for event in ("insert", "update", "delete"):
            op.execute(f"DROP TRIGGER search_{table}_{event}")
    op.execute("DROP TABLE search_text")
