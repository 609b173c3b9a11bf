"""Counting the SQL statements a piece of code runs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["statements"]


@contextmanager
def statements(engine: Engine) -> Iterator[list[str]]:
    """The SQL statements run on ``engine`` inside the block, in order (on SQLite, the
    BEGINs the engine issues included)."""
    seen: list[str] = []

    def note(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        seen.append(statement)

    event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", note)
