"""Text compared by its characters alone, alike on SQLite and PostgreSQL.

SQLite orders and compares text by its bytes (its ``BINARY`` collation): code point order,
``A`` before ``a``, ``aB`` before ``a_b``. PostgreSQL orders it by the database's
collation, which is byte order only for a ``C`` database: one made with an English
locale (``en_US.utf8``, the default of the official images, or an ICU ``en-US``) puts
``a`` before ``A`` and ``a_b`` before ``aB``. And ``LIKE`` folds ASCII case on SQLite,
never on PostgreSQL. Lists ordered by a text people write (scenario ids, tags, file
paths, judge specs) and matches of a part of such a text go through this module, so
that both engines list and match the same rows in the same order. The ids the service
makes (32 lowercase hex digits, ``storage.tables.new_id``) sort alike under any
collation and need none of it.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Integer, String, and_, func
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement

__all__ = ["bytewise", "bytewise_contains", "bytewise_starts_with"]


class bytewise(FunctionElement[str]):
    """A text column (or expression) ordered and compared by its bytes (code points):
    as it is on SQLite, and under ``COLLATE "C"`` on PostgreSQL. Use it in the ORDER BY
    and in the keyset comparison of a page alike, so that a cursor continues the order
    it was issued in.

    On PostgreSQL an index on the column as declared (the database's collation) does not
    serve ``ORDER BY column COLLATE "C"``: the rows are sorted, which suits lists of
    hundreds or thousands of rows (scenarios, tags, one report's groups)."""

    type = String()
    inherit_cache = True


@compiles(bytewise, "sqlite")
def _bytewise_sqlite(element: bytewise, compiler: SQLCompiler, **kw: Any) -> str:
    return compiler.process(element.clauses, **kw)  # BINARY: SQLite's own order


@compiles(bytewise, "postgresql")
def _bytewise_postgres(element: bytewise, compiler: SQLCompiler, **kw: Any) -> str:
    (text,) = element.clauses.clauses
    return f'{compiler.process(text.self_group(), **kw)} COLLATE "C"'


class _position(FunctionElement[int]):
    """Where a part first occurs in a text, counted from 1 (0: nowhere), case-sensitive:
    SQLite's ``instr``, PostgreSQL's ``strpos``."""

    type = Integer()
    inherit_cache = True


@compiles(_position, "sqlite")
def _position_sqlite(element: _position, compiler: SQLCompiler, **kw: Any) -> str:
    return f"instr({compiler.process(element.clauses, **kw)})"


@compiles(_position, "postgresql")
def _position_postgres(element: _position, compiler: SQLCompiler, **kw: Any) -> str:
    return f"strpos({compiler.process(element.clauses, **kw)})"


def bytewise_contains(text: Any, part: str) -> ColumnElement[bool]:
    """``text`` holds ``part`` as written (case-sensitive, no wildcards), on every engine."""
    return _position(text, part) > 0


def _like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def bytewise_starts_with(text: Any, prefix: str) -> ColumnElement[bool]:
    """``text`` starts with ``prefix`` as written (case-sensitive, no wildcards), on every
    engine. The ``LIKE`` lets an index narrow the rows where the engine can use one; as
    it folds ASCII case on SQLite, the first characters are compared exactly as well."""
    return and_(
        text.like(_like_prefix(prefix), escape="\\"),
        func.substr(text, 1, len(prefix)) == prefix,
    )
