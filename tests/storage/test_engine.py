"""Engines: URL rewriting, SQLite pragmas, BEGIN IMMEDIATE serialization."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from storage import default_database_url, is_postgres, make_engine
from storage.engine import sync_url


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:///x.db", "sqlite+pysqlite:///x.db"),
        ("sqlite:///./a.db", "sqlite+pysqlite:///./a.db"),
        ("sqlite+aiosqlite:///./a.db", "sqlite+pysqlite:///./a.db"),  # older settings
        ("postgresql://u@h:5432/d", "postgresql+psycopg://u@h:5432/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
        ("postgresql+psycopg2://u@h/d", "postgresql+psycopg://u@h/d"),
        ("postgresql+asyncpg://u@h/d", "postgresql+psycopg://u@h/d"),
    ],
)
def test_urls_are_rewritten_to_the_drivers_installed(given: str, expected: str) -> None:
    assert sync_url(given).render_as_string(hide_password=False) == expected


def test_default_database_is_a_sqlite_file_in_the_working_directory() -> None:
    assert default_database_url() == "sqlite:///./sre-judge.db"


async def test_sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        assert not is_postgres(engine)
        with engine.connect() as connection:
            pragma = connection.exec_driver_sql
            assert pragma("PRAGMA journal_mode").scalar() == "wal"
            assert pragma("PRAGMA foreign_keys").scalar() == 1
            assert pragma("PRAGMA busy_timeout").scalar() == 30000
            assert pragma("PRAGMA synchronous").scalar() == 1  # NORMAL
    finally:
        engine.dispose()


def test_sqlite_write_transactions_serialize_read_then_write(tmp_path: Path) -> None:
    """Under BEGIN IMMEDIATE, read-increment-write from many threads loses no update."""
    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    try:
        with engine.begin() as connection:
            connection.execute(text("CREATE TABLE counter (n INTEGER NOT NULL)"))
            connection.execute(text("INSERT INTO counter VALUES (0)"))

        def bump() -> None:
            with engine.begin() as connection:
                n = connection.execute(text("SELECT n FROM counter")).scalar_one()
                time.sleep(0.005)
                connection.execute(text("UPDATE counter SET n = :n"), {"n": n + 1})

        with ThreadPoolExecutor(max_workers=10) as threads:
            for done in [threads.submit(bump) for _ in range(10)]:
                done.result()
        with engine.connect() as connection:
            assert connection.execute(text("SELECT n FROM counter")).scalar_one() == 10
    finally:
        engine.dispose()


async def test_engine_reports_its_backend(engine: Engine, db_backend: str) -> None:
    assert is_postgres(engine) == (db_backend == "postgres")


async def test_foreign_keys_are_enforced_after_migrating(engine: Engine) -> None:
    """SQLite migrates with foreign keys off; the engine itself keeps them on."""
    with pytest.raises(IntegrityError), engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO answer (grading_id, question_id, dimension_id, answer, "
                "judge_answer, reasoning, evidence, position) "
                "VALUES ('nope', 'D1-Q1', 'D1', true, true, '', '', 0)"
            )
        )


def test_the_suites_engines_share_one_dialect_and_compiled_statement_cache(
    tmp_path: Path,
) -> None:
    """Every test makes engines of its own; ``tests/support/statement_cache.py`` lets them
    share one dialect and one compiled-statement cache, or each test compiles every
    statement again (an option of ``make_engine`` it does not know, such as
    ``hide_parameters`` once, turned that off and slowed the fast loop by a fifth)."""
    first = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with first.connect():
        pass
    second = make_engine(f"sqlite:///{tmp_path / 'b.db'}")
    try:
        assert second.dialect is first.dialect
        assert second._compiled_cache is first._compiled_cache
    finally:
        first.dispose()
        second.dispose()
