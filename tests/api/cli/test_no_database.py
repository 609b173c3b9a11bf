"""Commands that read the database refuse to create an empty one: run from another
folder, or against a database never migrated, they exit 2 with one line naming the
database URL and what to run, and leave no database file behind."""

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
