"""Commands that read the database refuse to create an empty one: run from another
folder, or against a database never migrated, they exit 2 with one line naming the
database URL and what to run, and leave no database file behind. Nor do the commands
that work on what is stored upgrade an older one: they say to run ``sre-judge migrate``."""

from __future__ import annotations

import os
import subprocess
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


@pytest.mark.parametrize(
    "args",
    [
        ("regrade", "status", "0" * 32),
        ("report", "attempts"),
        ("judges", "canary", "--history"),
        ("gradings", "move-judge", "--from", "scripted:fail"),
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
    from storage.migrate import migrate_to, revision_of

    previous = _previous_revision()
    migrate_to(database_url, previous)
    key = tmp_path / "service.key"
    key.write_text("k" * 64, encoding="utf-8")
    key.chmod(0o600)
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SRE_JUDGE_")}
    env |= {
        "NO_COLOR": "1",
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_PENDING_JUDGE": "pin",
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_SECRET_KEY_FILE": str(key),
    }
    done = cli_in_process(*args, env=env)
    assert done.returncode == 1, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and previous in line and "sre-judge migrate" in line
    assert revision_of(database_url) == previous
