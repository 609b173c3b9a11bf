"""Engines and sessions: SQLite (embedded default) or PostgreSQL through psycopg 3.

Synchronous SQLAlchemy: a use case runs whole in a worker thread
(``storage.database.Database.run``), so the event loop never waits for the database
and no async driver or greenlet bridge sits under each statement.

SQLite runs in WAL mode with foreign keys on, and every write transaction starts with
``BEGIN IMMEDIATE`` (SQLAlchemy's documented recipe: the driver's own BEGIN is
disabled on connect and the ``begin`` event emits ours). Writers therefore take the
database's write lock before their first read, so read-then-write sequences such as
"read the last audit hash, append the next row" or "pick pending gradings, lease them"
cannot interleave. Read-only work uses :func:`read_only` and starts ``BEGIN DEFERRED``,
which in WAL mode never waits for writers.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import StaticPool

__all__ = [
    "DEFAULT_DATABASE_URL",
    "default_database_url",
    "is_postgres",
    "make_engine",
    "read_only",
    "session_factory",
    "sync_url",
]

#: a SQLite file in the working directory
DEFAULT_DATABASE_URL = "sqlite:///./sre-judge.db"

#: execution option that makes the SQLite ``begin`` hook emit ``BEGIN DEFERRED``
_DEFERRED = "sre_judge_deferred"

_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=30000",
    "PRAGMA synchronous=NORMAL",
)


def default_database_url() -> str:
    """The embedded default: ``sqlite:///./sre-judge.db``."""
    return DEFAULT_DATABASE_URL


def sync_url(url: str | URL) -> URL:
    """The URL with its database's driver: pysqlite for SQLite, psycopg 3 for PostgreSQL.

    A driver named in the URL is replaced (``sqlite+aiosqlite://`` and
    ``postgresql+asyncpg://`` URLs of older configurations keep working).
    """
    parsed = make_url(url)
    backend = parsed.drivername.split("+", 1)[0]
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def make_engine(url: str | URL, *, foreign_keys: bool = True, **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite gets WAL, foreign keys and BEGIN IMMEDIATE.

    The engine's errors never quote a statement's parameters (``hide_parameters``): they
    are diagnoses, ground truths, prompts and replies, and a database fault's message is
    logged. ``foreign_keys=False`` is for SQLite schema migrations only: batch mode rebuilds
    tables, which enforced foreign keys would refuse while other rows refer to them.
    """
    target = sync_url(url)
    if target.get_backend_name() == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
    elif target.database in (None, "", ":memory:"):
        # one in-memory database for every thread a use case runs in, not one each
        kwargs.setdefault("poolclass", StaticPool)
        kwargs.setdefault("connect_args", {"check_same_thread": False})
    kwargs.setdefault("hide_parameters", True)
    engine = create_engine(target, **kwargs)
    if target.get_backend_name() == "sqlite":
        _configure_sqlite(engine, foreign_keys=foreign_keys)
    return engine


def _configure_sqlite(engine: Engine, *, foreign_keys: bool) -> None:
    pragmas = [
        p if foreign_keys or "foreign_keys" not in p else "PRAGMA foreign_keys=OFF"
        for p in _SQLITE_PRAGMAS
    ]

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # no implicit BEGIN from the driver: the begin hook below owns transactions
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            for pragma in pragmas:
                cursor.execute(pragma)
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        deferred = connection.get_execution_options().get(_DEFERRED, False)
        connection.exec_driver_sql("BEGIN DEFERRED" if deferred else "BEGIN IMMEDIATE")


def is_postgres(engine: Engine) -> bool:
    """True when ``engine`` talks to PostgreSQL."""
    return engine.dialect.name == "postgresql"


def read_only(engine: Engine) -> Engine:
    """The same engine (and pool) for read-only transactions: BEGIN DEFERRED on SQLite."""
    return engine.execution_options(**{_DEFERRED: True})


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions bound to ``engine`` whose objects stay readable after commit."""
    return sessionmaker(engine, expire_on_commit=False)
