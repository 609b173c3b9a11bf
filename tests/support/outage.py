"""Database outages for the tests of what probes say: no connection to be had, or queries
on the gradings failing while the database still answers; on SQLite and PostgreSQL alike,
each failing with its driver's own error, as a real outage does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["database_down", "queue_queries_fail"]


@contextmanager
def database_down(engine: Engine) -> Iterator[None]:
    """The database cannot be reached (every new connection fails with the driver's own
    error, as a refused one does) and the pool holds no connection: every use of the
    database fails, as in an outage."""
    refused = engine.dialect.loaded_dbapi.OperationalError

    def refuse(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.close()
        raise refused("connection refused: the database is down")

    engine.dispose()
    event.listen(engine, "connect", refuse)
    try:
        yield
    finally:
        event.remove(engine, "connect", refuse)
        engine.dispose()


@contextmanager
def queue_queries_fail(engine: Engine) -> Iterator[None]:
    """The database answers ``SELECT 1`` but a query on the gradings fails (a statement or
    lock timeout, a table being rewritten, an I/O error on its pages)."""

    failure = engine.dialect.loaded_dbapi.OperationalError

    def fail(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "FROM grading " in statement:
            raise failure("disk I/O error")

    event.listen(engine, "before_cursor_execute", fail)
    try:
        yield
    finally:
        event.remove(engine, "before_cursor_execute", fail)
