"""Schema migrations without an ``alembic.ini``: the config is built in code.

``upgrade`` runs Alembic inside one transaction (the connection is injected into
``migrations/env.py``), so it works from inside a running event loop. On a SQLite file
it migrates through a separate connection with foreign keys off, as batch mode needs
(the pragma cannot change inside a transaction), and then runs
``PRAGMA foreign_key_check``.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from storage.db import make_engine, read_only

__all__ = ["MIGRATIONS_DIR", "alembic_config", "current_revision", "head_revision", "upgrade"]

#: the folder holding ``env.py`` and ``versions/``
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at this package's migrations."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str | None:
    """The newest revision the code knows."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _upgrade(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def _current(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()


async def upgrade(engine_or_url: AsyncEngine | str | URL, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (the newest by default)."""
    engine, owned = _engine(engine_or_url)
    try:
        if engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:"):
            await _upgrade_sqlite(engine.url, revision)
        else:
            async with engine.begin() as connection:
                await connection.run_sync(_upgrade, revision)
    finally:
        if owned:
            await engine.dispose()


async def _upgrade_sqlite(url: URL, revision: str) -> None:
    engine = make_engine(url, foreign_keys=False, poolclass=NullPool)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(_upgrade, revision)
            broken = (await connection.exec_driver_sql("PRAGMA foreign_key_check")).all()
            if broken:
                raise RuntimeError(f"migration left rows with broken foreign keys: {broken[:5]}")
    finally:
        await engine.dispose()


async def current_revision(engine_or_url: AsyncEngine | str | URL) -> str | None:
    """The revision the database is at, or None when it was never migrated."""
    engine, owned = _engine(engine_or_url)
    try:
        async with read_only(engine).connect() as connection:
            return await connection.run_sync(_current)
    finally:
        if owned:
            await engine.dispose()


def _engine(engine_or_url: AsyncEngine | str | URL) -> tuple[AsyncEngine, bool]:
    if isinstance(engine_or_url, AsyncEngine):
        return engine_or_url, False
    return make_engine(engine_or_url), True
