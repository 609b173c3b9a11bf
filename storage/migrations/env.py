"""Alembic environment: synchronous, with an injected connection when one is given.

``storage.migrate`` passes a synchronous connection in ``config.attributes["connection"]``;
the ``alembic`` command line instead gives a URL (``sqlalchemy.url`` or
``SRE_JUDGE_DATABASE_URL``), for which a synchronous engine is built here
(``storage.engine.make_engine``). SQLite gets batch mode so later ALTERs work.
"""

from __future__ import annotations

import os

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import storage.imports.tables
import storage.judge_digests
import storage.quality_tables
import storage.regrade.batch_tables
import storage.regrade.tables
import storage.review_tables
import storage.scenario_tables
import storage.tables
import storage.webhooks.tables  # noqa: F401
from storage.engine import default_database_url, make_engine
from storage.search import include_in_autogenerate

config = context.config
target_metadata = SQLModel.metadata


def do_run_migrations(connection: Connection) -> None:
    """Run the migrations on a synchronous connection."""
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=include_in_autogenerate,  # the search index is the migration's
    )
    with context.begin_transaction():
        context.run_migrations()


def run_url_migrations(url: str) -> None:
    """Build an engine from ``url`` and migrate through it."""
    engine = make_engine(url)
    try:
        with engine.begin() as connection:
            do_run_migrations(connection)
    finally:
        engine.dispose()


def run_migrations_offline() -> None:
    """Emit SQL instead of running it (``alembic upgrade --sql``)."""
    url = config.get_main_option("sqlalchemy.url") or default_database_url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Use the injected connection, or connect to the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        do_run_migrations(connection)
        return
    url = (
        config.get_main_option("sqlalchemy.url")
        or os.environ.get("SRE_JUDGE_DATABASE_URL")
        or default_database_url()
    )
    run_url_migrations(url)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
