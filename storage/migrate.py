"""Schema migrations without an ``alembic.ini``: the config is built in code.

Alembic is synchronous: :func:`migrate_to` runs it inside one transaction over a
synchronous engine (the connection is injected into ``migrations/env.py``), and the
async :func:`upgrade` runs that in a worker thread, so it works from inside a running
event loop. On a SQLite file it migrates through a separate connection with foreign
keys off, as batch mode needs (the pragma cannot change inside a transaction), and then
runs ``PRAGMA foreign_key_check``.

Only ``serve`` and ``migrate`` upgrade a database from an older revision; a command
that writes makes the schema of a database never migrated (``migrate_to(...,
new_only=True)``) and every other process refuses a schema that is not its newest
(:func:`require_newest`), so a newer release's command run against a deployment never
upgrades the schema under the servers and workers of the older release.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.pool import NullPool

from storage.engine import make_engine, read_only
from storage.errors import SchemaMismatch

__all__ = [
    "MIGRATIONS_DIR",
    "alembic_config",
    "current_revision",
    "head_revision",
    "migrate_to",
    "require_newest",
    "revision_of",
    "upgrade",
]

#: the folder holding ``env.py`` and ``versions/``
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at this package's migrations."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


#: the PostgreSQL advisory lock a migration holds (any constant no other lock uses)
_MIGRATION_LOCK = 0x5E_7E_1D_6E_00_00_00_01


@functools.cache
def head_revision() -> str | None:
    """The newest revision the code knows (the migration files are read once)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _at(connection: Connection, revision: str) -> bool:
    """Whether the database is at ``revision`` already (only ``head`` is looked up: a
    database at the newest schema starts without Alembic reading every migration)."""
    return revision == "head" and _current(connection) == head_revision()


def _known(revision: str | None) -> bool:
    """Whether this code's migrations hold ``revision`` (None: never migrated); the
    migration files are read only for a database not at the newest revision."""
    if revision is None or revision == head_revision():
        return True
    script = ScriptDirectory.from_config(alembic_config())
    return revision in {each.revision for each in script.walk_revisions()}


def _newer_than_code(revision: str) -> SchemaMismatch:
    return SchemaMismatch(
        f"the database is at schema revision {revision}, which this sre-judge does not know "
        f"(its newest is {head_revision()}): a newer release migrated it; run that release "
        "(or a newer one), never an older one, on this database"
    )


def _not_newest(current: str | None, *, never_migrated: bool = False) -> SchemaMismatch | None:
    """The refusal of a database at ``current`` for a process of this code that does not
    upgrade it: None at the newest revision (or, with ``never_migrated``, at none)."""
    if current == head_revision() or (never_migrated and current is None):
        return None
    if not _known(current):
        return _newer_than_code(str(current))
    return SchemaMismatch(
        f"the database is at schema revision {current or 'none (never migrated)'}, this "
        f"sre-judge needs {head_revision()}: run `sre-judge migrate` (or start `sre-judge "
        "serve`, which migrates) first"
    )


def _upgrade(connection: Connection, revision: str, *, new_only: bool) -> None:
    current = _current(connection)
    refusal = _not_newest(current, never_migrated=True) if new_only else None
    if refusal is not None:
        raise refusal
    if not _known(current):
        raise _newer_than_code(str(current))
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(
    engine_or_url: Engine | str | URL, revision: str = "head", *, new_only: bool = False
) -> None:
    """Upgrade the database to ``revision`` (the newest by default), in a worker thread;
    ``new_only`` as :func:`migrate_to`."""
    await asyncio.to_thread(migrate_to, engine_or_url, revision, new_only=new_only)


def migrate_to(
    engine_or_url: Engine | str | URL, revision: str = "head", *, new_only: bool = False
) -> None:
    """Upgrade the database to ``revision`` (the newest by default); it blocks.

    ``new_only`` (the commands that write, never ``serve`` nor ``migrate``): make the
    schema of a database never migrated, and refuse one at an older revision as
    :func:`require_newest` does rather than upgrade it under its servers and workers."""
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else make_url(engine_or_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        _upgrade_sqlite(url, revision, new_only=new_only)
        return
    with _engine(engine_or_url) as engine, engine.begin() as connection:
        # one migration at a time (replicas started together): the others wait for the
        # first one's commit, then find the database at the revision (the DDL is in the
        # transaction, as the lock is)
        if url.get_backend_name() == "postgresql":
            lock = text("SELECT pg_advisory_xact_lock(:key)")
            connection.execute(lock, {"key": _MIGRATION_LOCK})
        if not _at(connection, revision):
            _upgrade(connection, revision, new_only=new_only)


def _upgrade_sqlite(url: URL, revision: str, *, new_only: bool) -> None:
    engine = make_engine(url, foreign_keys=False, poolclass=NullPool)
    try:
        with engine.begin() as connection:
            if _at(connection, revision):
                return
            _upgrade(connection, revision, new_only=new_only)
            broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
            if broken:
                raise RuntimeError(f"migration left rows with broken foreign keys: {broken[:5]}")
    finally:
        engine.dispose()


async def current_revision(engine_or_url: Engine | str | URL) -> str | None:
    """The revision the database is at, or None when it was never migrated (read in a
    worker thread)."""
    return await asyncio.to_thread(revision_of, engine_or_url)


def revision_of(engine_or_url: Engine | str | URL) -> str | None:
    """The revision the database is at, or None when it was never migrated; it blocks."""
    with _engine(engine_or_url) as engine, read_only(engine).connect() as connection:
        return _current(connection)


def require_newest(engine_or_url: Engine | str | URL, *, never_migrated: bool = False) -> None:
    """Refuse (:class:`~storage.errors.SchemaMismatch`) a database that is not at this
    code's newest revision, for processes that use a database without upgrading it (a
    ``worker`` beside a ``serve`` that migrates, the commands); with ``never_migrated`` a
    database at no revision passes too (a command that will make its schema); it
    blocks."""
    refusal = _not_newest(revision_of(engine_or_url), never_migrated=never_migrated)
    if refusal is not None:
        raise refusal


@contextmanager
def _engine(engine_or_url: Engine | str | URL) -> Iterator[Engine]:
    """The engine given, or one made for the URL given and disposed of afterwards."""
    if isinstance(engine_or_url, Engine):
        yield engine_or_url
        return
    engine = make_engine(engine_or_url)
    try:
        yield engine
    finally:
        engine.dispose()
