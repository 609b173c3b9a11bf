"""Database outages for the tests of what probes say: the file gone, or queries on the
gradings failing while the database still answers."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["database_down", "queue_queries_fail"]


@contextmanager
def database_down(engine: Engine) -> Iterator[None]:
    """The SQLite database cannot be opened any more (its file replaced by a folder), and
    the pool holds no connection: every use of the database fails, as in an outage."""
    path = Path(str(engine.url.database))
    engine.dispose()
    moved = {p: p.with_name(p.name + ".away") for p in path.parent.glob(path.name + "*")}
    for old, new in moved.items():
        old.rename(new)
    path.mkdir()
    try:
        yield
    finally:
        path.rmdir()
        engine.dispose()
        for old, new in moved.items():
            new.rename(old)


@contextmanager
def queue_queries_fail(engine: Engine) -> Iterator[None]:
    """The database answers ``SELECT 1`` but a query on the gradings fails (a statement or
    lock timeout, a table being rewritten, an I/O error on its pages)."""

    def fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "FROM grading " in statement:
            raise sqlite3.OperationalError("disk I/O error")

    event.listen(engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", fail)
