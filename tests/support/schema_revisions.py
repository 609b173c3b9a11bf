"""A database stamped at another schema revision for a block, as a newer release leaves it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import text
from sqlalchemy.engine import Engine

from storage import head_revision

__all__ = ["at_revision"]


@contextmanager
def at_revision(engine: Engine, revision: str) -> Iterator[None]:
    """The database stamped at ``revision`` for the block, then at the newest again (a
    PostgreSQL test database is emptied and reused, its schema kept)."""
    stamp = text("UPDATE alembic_version SET version_num = :v")
    with engine.begin() as connection:
        connection.execute(stamp, {"v": revision})
    try:
        yield
    finally:
        with engine.begin() as connection:
            connection.execute(stamp, {"v": head_revision()})
