"""Migrations: an empty database upgrades to head and matches the models exactly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import storage.tables  # noqa: F401  (registers the tables)
from storage import current_revision, head_revision, make_engine, upgrade


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, SQLModel.metadata))


async def test_empty_database_upgrades_to_head_without_autogenerate_diff(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    try:
        assert await current_revision(engine) is None
        await upgrade(engine)
        assert await current_revision(engine) == head_revision()
        async with engine.connect() as connection:
            assert await connection.run_sync(_diff) == []
    finally:
        await engine.dispose()


async def test_upgrade_twice_is_harmless_and_accepts_a_url(database_url: str) -> None:
    await upgrade(database_url)
    await upgrade(database_url)
    assert await current_revision(database_url) == head_revision()


def test_there_is_one_head() -> None:
    from alembic.script import ScriptDirectory

    from storage.migrate import alembic_config

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert heads == [head_revision()]
