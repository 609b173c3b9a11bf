"""Engines and sessions: SQLite (embedded default) or PostgreSQL through psycopg 3.

SQLite runs in WAL mode with foreign keys on, and every write transaction starts with
``BEGIN IMMEDIATE`` (SQLAlchemy's documented recipe: the driver's own BEGIN is
disabled on connect and the ``begin`` event emits ours). Writers therefore take the
database's write lock before their first read, so read-then-write sequences such as
"read the last audit hash, append the next row" or "pick pending gradings, lease them"
cannot interleave. Read-only work uses :func:`read_only` and starts ``BEGIN DEFERRED``,
which in WAL mode never waits for writers.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

__all__ = [
    "DEFAULT_DATABASE_URL",
    "async_url",
    "default_database_url",
    "engines_of",
    "is_postgres",
    "make_engine",
    "read_only",
    "session_factory",
    "sync_twin",
    "sync_url",
]

#: a SQLite file in the working directory
DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./sre-judge.db"

_E = TypeVar("_E", AsyncEngine, Engine)

#: execution option that makes the SQLite ``begin`` hook emit ``BEGIN DEFERRED``
_DEFERRED = "sre_judge_deferred"

_SQLITE_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=30000",
    "PRAGMA synchronous=NORMAL",
)


def default_database_url() -> str:
    """The embedded default: ``sqlite+aiosqlite:///./sre-judge.db``."""
    return DEFAULT_DATABASE_URL


def async_url(url: str | URL) -> URL:
    """Rewrite ``sqlite://`` and ``postgresql://`` URLs to their async drivers."""
    parsed = make_url(url)
    backend = parsed.drivername.split("+", 1)[0]
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+aiosqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


def make_engine(url: str | URL, *, foreign_keys: bool = True, **kwargs: Any) -> AsyncEngine:
    """An async engine for ``url``; SQLite gets WAL, foreign keys and BEGIN IMMEDIATE.

    ``foreign_keys=False`` is for SQLite schema migrations only: batch mode rebuilds
    tables, which enforced foreign keys would refuse while other rows refer to them.
    """
    target = async_url(url)
    if target.get_backend_name() == "postgresql":
        kwargs.setdefault("pool_pre_ping", True)
    engine = create_async_engine(target, **kwargs)
    if target.get_backend_name() == "sqlite":
        _configure_sqlite(engine.sync_engine, foreign_keys=foreign_keys)
    return engine


def sync_url(url: str | URL) -> URL:
    """Rewrite a URL to the synchronous driver of its database (pysqlite, psycopg)."""
    parsed = make_url(url)
    backend = parsed.drivername.split("+", 1)[0]
    if backend == "sqlite":
        return parsed.set(drivername="sqlite+pysqlite")
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    return parsed


#: the synchronous twin of each async engine (see ``sync_twin``)
_TWINS: weakref.WeakKeyDictionary[AsyncEngine, Engine] = weakref.WeakKeyDictionary()


def sync_twin(engine: AsyncEngine) -> Engine:
    """The synchronous engine over the same database as ``engine``, made once per engine.

    Use cases that run whole in a worker thread (``Database.run``) work through it: a
    statement through synchronous SQLAlchemy costs a fraction of one through the async
    bridge (``bench/statement_cost.py``). It has the same SQLite set-up (WAL, foreign
    keys, BEGIN IMMEDIATE for writers) and is disposed of with ``engine``.
    """
    twin = _TWINS.get(engine)
    if twin is not None:
        return twin
    target = sync_url(engine.url)
    kwargs: dict[str, Any] = {}
    if target.get_backend_name() == "postgresql":
        kwargs["pool_pre_ping"] = True
    twin = create_engine(target, **kwargs)
    if target.get_backend_name() == "sqlite":
        _configure_sqlite(twin, foreign_keys=True)

    @event.listens_for(engine.sync_engine, "engine_disposed")
    def _disposed(_engine: Any) -> None:
        twin.dispose()

    _TWINS[engine] = twin
    return twin


def engines_of(engine: AsyncEngine) -> tuple[Engine, Engine]:
    """The synchronous engines that carry ``engine``'s statements: the one inside it and
    its twin (``sync_twin``); where to listen for every statement or transaction."""
    return engine.sync_engine, sync_twin(engine)


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


def is_postgres(engine: AsyncEngine) -> bool:
    """True when ``engine`` talks to PostgreSQL."""
    return engine.dialect.name == "postgresql"


def read_only(engine: _E) -> _E:
    """The same engine (and pool) for read-only transactions: BEGIN DEFERRED on SQLite."""
    return engine.execution_options(**{_DEFERRED: True})


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions bound to ``engine`` whose objects stay readable after commit."""
    return async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)
