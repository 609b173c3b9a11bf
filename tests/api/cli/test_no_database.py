"""Commands that read the database refuse to create an empty one: run from another
folder, or against a database never migrated, they exit 2 with one line naming the
database URL and what to run, and leave no database file behind. No command but
``serve`` and ``migrate`` upgrades an older one, not even those that make the schema of a
new database: they say to run ``sre-judge migrate``."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.support.in_process_cli import cli_in_process

READERS = [
    ("report", "pass-rates"),
    ("export", "--format", "jsonl", "-o", "out.jsonl"),
    ("regrade", "--judge", "scripted:fail", "--dry-run"),
    ("regrade", "status", "0" * 32),
    ("audit", "verify"),
    ("tokens", "list"),
    ("tokens", "revoke", "0" * 32),
    ("judges", "canary", "--history"),
]


@pytest.fixture
def run_in(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``sre-judge ARGS`` run in a folder, on the embedded default database unless a URL
    is given (in process: the working folder is what the default is relative to)."""

    def run(cwd: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
        monkeypatch.chdir(cwd)
        env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SRE_JUDGE_")}
        env |= {"NO_COLOR": "1", "SRE_JUDGE_JUDGE": "scripted:pass"}
        if url is not None:
            env["SRE_JUDGE_DATABASE_URL"] = url
        return cli_in_process(*args, env=env)

    return run


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a[:2]))
def test_a_reading_command_in_another_folder_creates_no_database(
    tmp_path: Path, args: tuple[str, ...], run_in: Any
) -> None:
    done = run_in(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "sqlite:///./sre-judge.db" in lines[0]
    assert "sre-judge migrate" in lines[0] and "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no database, no key file


def test_a_database_never_migrated_is_refused_too(
    database_url: str, tmp_path: Path, run_in: Any
) -> None:
    done = run_in(tmp_path, "report", "pass-rates", url=database_url)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "sre-judge migrate" in line
    assert not (tmp_path / "sre-judge.db").exists()


def _previous_revision() -> str:
    """The revision just before this release's newest."""
    from alembic.script import ScriptDirectory

    from storage.migrate import alembic_config, head_revision

    script = ScriptDirectory.from_config(alembic_config())
    down = script.get_revision(head_revision()).down_revision
    assert isinstance(down, str)
    return down


@functools.cache
def _older_sqlite_template(revision: str) -> Path:
    """A SQLite file migrated to ``revision`` once per test process (each test copies it:
    migrating from nothing takes about a second)."""
    from storage.migrate import migrate_to

    path = Path(tempfile.mkdtemp(prefix="sre-judge-older-")) / "older.db"
    migrate_to(f"sqlite:///{path}", revision)
    return path


def _older_schema(database_url: str, tmp_path: Path) -> tuple[str, dict[str, str | None]]:
    """The revision just before this release's newest, ``database_url`` migrated to it (a
    deployment whose servers and workers run the previous release), and the environment
    of a command of this release on it (its service key file not there yet)."""
    previous = _previous_revision()
    if database_url.startswith("sqlite:///"):
        shutil.copyfile(_older_sqlite_template(previous), database_url.removeprefix("sqlite:///"))
    else:
        from storage.migrate import migrate_to

        migrate_to(database_url, previous)
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SRE_JUDGE_")}
    env |= {
        "NO_COLOR": "1",
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_PENDING_JUDGE": "pin",
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "key" / "service.key"),
        "SRE_JUDGE_AUDIT_CHECKPOINT": "off",
    }
    return previous, env


def _given_key(env: dict[str, str | None]) -> None:
    """The service key file of ``env`` made, as a deployment's processes are given it."""
    key = Path(str(env["SRE_JUDGE_SECRET_KEY_FILE"]))
    key.parent.mkdir()
    key.write_text("k" * 64, encoding="utf-8")
    key.chmod(0o600)


def _refused_as_older(done: subprocess.CompletedProcess[str], previous: str) -> None:
    """One line, exit 1, naming both revisions and saying to run ``sre-judge migrate``
    (``audit verify`` says first which checkpoint it would check)."""
    from storage.migrate import head_revision

    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    (line,) = [each for each in lines if not each.startswith("no checkpoint checked: ")]
    assert line.startswith("error: ") and previous in line and str(head_revision()) in line
    assert "sre-judge migrate" in line


@pytest.mark.parametrize(
    "args",
    [
        ("regrade", "status", "0" * 32),
        ("report", "attempts"),
        ("judges", "canary", "--history"),
        ("gradings", "move-judge", "--from", "scripted:fail"),
        ("tokens", "revoke", "0" * 32),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_command_on_stored_records_never_upgrades_the_schema(
    database_url: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """Only ``serve`` and ``migrate`` upgrade a deployment's schema: a newer release's
    command that works on what is stored (a job's status, a report, a move of pending
    gradings), run against a database at an older revision whose servers and workers run
    that older release, leaves the revision as it is (they would refuse a newer one) and
    refuses in one line that says to run ``sre-judge migrate``."""
    from storage.migrate import revision_of

    previous, env = _older_schema(database_url, tmp_path)
    _given_key(env)
    done = cli_in_process(*args, env=env)
    _refused_as_older(done, previous)
    assert revision_of(database_url) == previous


@pytest.mark.postgres
@pytest.mark.parametrize(
    "args",
    [
        ("tokens", "create", "--role", "submitter", "--name", "harness"),
        ("scenarios", "load", "SCENARIOS"),
        ("import", "jsonl", "HISTORY"),
        ("judges", "canary"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_command_that_writes_never_upgrades_an_older_schema(
    database_url: str, tmp_path: Path, args: tuple[str, ...]
) -> None:
    """A command that writes records makes the schema of a new database, never upgrades a
    deployment's: run by a newer release against a database at an older revision, whose
    servers of that release would answer 500 on a schema they do not know, it refuses in
    one line naming both revisions, as ``tokens revoke`` does, and leaves the revision
    (and the key file) as they were."""
    from storage.migrate import revision_of

    files = {
        "SCENARIOS": ('{"id": "hotel/x", "ground_truth": "USER_PORT is 9999."}\n', "s.jsonl"),
        "HISTORY": ('{"diagnosis": "USER_PORT is 9999.", "ground_truth": "port"}\n', "h.jsonl"),
    }
    for text, name in files.values():
        (tmp_path / name).write_text(text, encoding="utf-8")
    args = tuple(str(tmp_path / files[a][1]) if a in files else a for a in args)
    previous, env = _older_schema(database_url, tmp_path)
    done = cli_in_process(*args, env=env)
    _refused_as_older(done, previous)
    assert revision_of(database_url) == previous
    assert not Path(str(env["SRE_JUDGE_SECRET_KEY_FILE"])).exists()


@pytest.mark.postgres
def test_a_command_that_writes_makes_the_schema_of_a_new_database(
    database_url: str, tmp_path: Path
) -> None:
    """``tokens create`` on a database never migrated (an empty PostgreSQL database, a
    SQLite file not there yet) makes the newest schema and prints the token."""
    from storage.migrate import head_revision, revision_of

    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SRE_JUDGE_")}
    env |= {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "service.key"),
    }
    done = cli_in_process("tokens", "create", "--role", "admin", "--name", "ops", env=env)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 1
    assert revision_of(database_url) == head_revision()


@pytest.mark.postgres
@pytest.mark.parametrize(
    "args",
    [
        ("export", "--format", "jsonl", "-o", "out.jsonl"),
        ("scenarios", "list"),
        ("report", "pass-rates"),
        ("audit", "verify"),
        ("tokens", "list"),
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_reading_command_on_an_older_schema_says_to_migrate(
    database_url: str, tmp_path: Path, args: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer release's reading command on a database at an older revision does not
    fail on a column that revision lacks: it refuses in the one line the commands on
    stored records give, naming both revisions and saying to run ``sre-judge migrate``."""
    monkeypatch.chdir(tmp_path)
    previous, env = _older_schema(database_url, tmp_path)
    _given_key(env)
    done = cli_in_process(*args, env=env)
    _refused_as_older(done, previous)
    assert not (tmp_path / "out.jsonl").exists()
