"""Shared fixtures: databases on SQLite and PostgreSQL, migrated engines, the store.

``--db sqlite|postgres|all`` chooses the databases that database tests run on
(default sqlite; CI runs all). Under ``all``, a test runs on PostgreSQL too where the
engine matters: every test under ``tests/storage`` (the SQL itself), and every test
marked ``postgres`` (queries a feature owns, locks and leases, constraints, several
processes on one database); the rest runs on SQLite only, as the engine plays no part
in what it checks. ``--db postgres`` runs every database test on PostgreSQL.

Each test gets a database no other test touches: a temporary SQLite file, or a
PostgreSQL database ``srejudge_test_<random>`` that the tests create and drop (migrated
ones are emptied and reused within a session; see ``database_url``).
``SRE_JUDGE_TEST_POSTGRES`` names the server's admin database.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import Engine

from api.service.checkpoints import default_checkpoint_file
from storage import Store, make_engine
from storage.canonical import utcnow
from storage.keys import ServiceKey
from storage.migrate import migrate_to
from tests.support import statement_cache

#: where tests create and drop their PostgreSQL databases
POSTGRES_ADMIN_URL = os.environ.get(
    "SRE_JUDGE_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--db``."""
    parser.addoption(
        "--db",
        choices=("sqlite", "postgres", "all"),
        default="sqlite",
        help="databases for storage and API tests (default: sqlite; CI runs all)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Keep the service key that runtimes create out of the work tree; register markers;
    share compiled statements between the tests' engines (``statement_cache``)."""
    statement_cache.install()
    config.addinivalue_line(
        "markers", "tampers: the test edits the database behind the store's back"
    )
    config.addinivalue_line(
        "markers",
        "postgres: under --db all, also run on PostgreSQL (the engine matters: SQL a "
        "feature owns, locks, constraints, several processes on one database)",
    )
    if "SRE_JUDGE_SECRET_KEY_FILE" not in os.environ:
        folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"sre-judge-test-key-{os.getpid()}"
        os.environ["SRE_JUDGE_SECRET_KEY_FILE"] = str(folder / "sre-judge.key")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker more than the usable cores. A good part of the suite waits
    rather than computes (real server processes on timers, receivers that answer slowly,
    the real model's server on one thread of its own), so a third worker on two cores
    keeps them busy; more than one extra made CPU-bound tests queue behind each other."""
    del config
    return len(os.sched_getaffinity(0)) + 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the longest files first: those with real-model tests (minutes of generation),
    then those with other ``slow`` ones, then the rest; within each group the files with
    more tests first, each file kept whole. Under ``--dist loadfile`` a file is one unit
    of work and xdist hands them out in this order (``--no-loadscope-reorder`` in the
    pytest options: its own order, by test count alone, put the one-test real-model files
    last, and one worker generated for minutes while the other stood idle)."""
    del config

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("real_model") is not None:
            return 0
        return 1 if item.get_closest_marker("slow") is not None else 2

    ranks: dict[Path, int] = {}
    counts: dict[Path, int] = {}
    for item in items:
        ranks[item.path] = min(ranks.get(item.path, 2), rank(item))
        counts[item.path] = counts.get(item.path, 0) + 1
    items.sort(key=lambda item: (ranks[item.path], -counts[item.path]))  # stable


#: the folder whose every test runs on both databases under ``--db all``
_BOTH_DATABASES = Path(__file__).parent / "storage"


def _engine_matters(metafunc: pytest.Metafunc) -> bool:
    path = Path(str(metafunc.definition.path))
    return path.is_relative_to(_BOTH_DATABASES) or bool(
        metafunc.definition.get_closest_marker("postgres")
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that needs a database once per chosen backend (``--db all``: on
    PostgreSQL too where the engine matters, see the module's docstring)."""
    if "db_backend" in metafunc.fixturenames:
        choice = metafunc.config.getoption("--db")
        if choice == "all":
            backends = ["sqlite", "postgres"] if _engine_matters(metafunc) else ["sqlite"]
        else:
            backends = [choice]
        metafunc.parametrize("db_backend", backends)


def _postgres_url(name: str) -> str:
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    return f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"


def _create_postgres_database() -> str:
    name = f"srejudge_test_{secrets.token_hex(6)}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop_postgres_database(name: str) -> None:
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class PostgresDatabases:
    """Migrated PostgreSQL databases, emptied after each test and handed out again.

    ``CREATE DATABASE`` costs a checkpoint (about 0.2 s); emptying a database with one
    ``TRUNCATE`` costs milliseconds. A database that cannot be emptied is dropped.
    """

    def __init__(self) -> None:
        self._idle: list[str] = []
        self._all: list[str] = []

    def acquire(self) -> str:
        """An empty database at the newest schema that no other test is using."""
        if self._idle:
            return self._idle.pop()
        name = _create_postgres_database()
        self._all.append(name)
        migrate_to(_postgres_url(name))
        return name

    def release(self, name: str) -> None:
        """Empty every table but ``alembic_version`` and keep the database for reuse.

        Its default audit checkpoint file (beside the service key) goes too: the next
        test's log starts again from row 1, which that file would call a rollback.
        """
        key_file = Path(os.environ["SRE_JUDGE_SECRET_KEY_FILE"])
        checkpoints = default_checkpoint_file(_postgres_url(name), key_file)
        if checkpoints is not None:
            checkpoints.unlink(missing_ok=True)
        url = f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
        try:
            with psycopg.connect(url, autocommit=True) as connection:
                connection.execute("SET lock_timeout = '5s'")
                rows = connection.execute(
                    "SELECT quote_ident(tablename) FROM pg_tables "
                    "WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
                ).fetchall()
                if rows:
                    tables = ", ".join(row[0] for row in rows)
                    connection.execute(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
        except psycopg.Error:
            self._all.remove(name)
            _drop_postgres_database(name)
            return
        self._idle.append(name)

    def drop_all(self) -> None:
        """Drop every database handed out."""
        for name in self._all:
            _drop_postgres_database(name)
        self._all.clear()
        self._idle.clear()


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    """The session's reusable migrated PostgreSQL databases, dropped at the end."""
    databases = PostgresDatabases()
    try:
        yield databases
    finally:
        databases.drop_all()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per session, copied by ``database_url``."""
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    migrate_to(f"sqlite:///{path}")  # disposing checkpoints the WAL
    return path


@pytest.fixture
def database_url(db_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a database of this test's own, on the backend under test.

    Empty, unless the test also uses ``engine``: then it is already at the newest schema
    (a copy of a SQLite file migrated once per session, or a migrated PostgreSQL
    database emptied after its last use), because creating and migrating a database
    for every test would dominate the suite's time. ``engine`` upgrades it either way.
    """
    migrated = "engine" in request.fixturenames
    if db_backend == "sqlite":
        path = tmp_path / "sre-judge.db"
        if migrated:
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    if not migrated:
        name = _create_postgres_database()
        try:
            yield _postgres_url(name)
        finally:
            _drop_postgres_database(name)
        return
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    name = databases.acquire()
    try:
        yield _postgres_url(name)
    finally:
        databases.release(name)


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """An engine on ``database_url``, migrated to the newest schema."""
    engine = make_engine(database_url)
    migrate_to(engine)
    try:
        yield engine
    finally:
        engine.dispose()


class Clock:
    """Real UTC time plus an offset that tests move forward."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return utcnow() + self.offset

    def advance(self, seconds: float) -> None:
        """Jump ``seconds`` into the future."""
        self.offset += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    """The store's clock; ``clock.advance(s)`` jumps ahead."""
    return Clock()


@pytest.fixture(scope="session")
def service_key() -> ServiceKey:
    """The service key of ``SRE_JUDGE_SECRET_KEY_FILE``, the one the apps under test use."""
    from tests.support.keys import session_key

    return session_key()


@pytest.fixture
def store(engine: Engine, clock: Clock, service_key: ServiceKey) -> Store:
    """A store on the migrated engine, driven by ``clock``, keyed as the app under test."""
    return Store(engine, clock=clock, key=service_key)
