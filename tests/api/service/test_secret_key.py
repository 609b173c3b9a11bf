"""The service key file: created once, whole, however many processes start together
(whoever reads it finds the complete key, never a file still being written); one that
cannot be read as a key or cannot be made is refused in one line naming
``SRE_JUDGE_SECRET_KEY_FILE`` (exit 2), before any schema is made."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from api.service.secret_key import MissingServiceKey, load_service_key
from api.service.settings import Settings
from tests.support.in_process_cli import cli_in_process

#: the commands that make a new database's schema and key: the service, a writing command
MAKING_COMMANDS = [("serve",), ("tokens", "create", "--role", "admin", "--name", "ops")]


def _start_together(settings: Settings, count: int) -> tuple[list[bytes], list[Exception]]:
    """``count`` starts loading (and creating) the key at the same moment."""
    starting = threading.Barrier(count)
    keys: list[bytes] = []
    refused: list[Exception] = []

    def start() -> None:
        starting.wait()
        try:
            keys.append(load_service_key(settings, create=True).secret)
        except MissingServiceKey as exc:
            refused.append(exc)

    threads = [threading.Thread(target=start) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return keys, refused


def test_processes_starting_together_all_read_one_whole_key(tmp_path: Path) -> None:
    for attempt in range(40):
        settings = Settings(secret_key_file=tmp_path / f"run-{attempt}" / "sre-judge.key")
        keys, refused = _start_together(settings, 8)
        assert not refused, f"attempt {attempt}: {refused[0]}"
        assert len(set(keys)) == 1 and len(keys[0]) == 64
        assert settings.secret_key_file.stat().st_mode & 0o777 == 0o600
        assert [p.name for p in settings.secret_key_file.parent.iterdir()] == ["sre-judge.key"]


def _env(tmp_path: Path, key_file: Path) -> dict[str, str | None]:
    return {
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}",
        "SRE_JUDGE_SECRET_KEY_FILE": str(key_file),
        "SRE_JUDGE_SECRET_KEY": None,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_PORT": "0",
        "NO_COLOR": "1",
    }


def _refusal(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-400:])
    lines = [line for line in done.stderr.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr[-400:]
    return lines[0]


@pytest.mark.parametrize("command", MAKING_COMMANDS)
def test_a_key_file_that_is_not_text_is_refused_naming_the_variable(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A key file of raw random bytes (``openssl rand 32`` without ``-hex``) is refused
    in one line naming ``SRE_JUDGE_SECRET_KEY_FILE`` and the file, and no schema is
    made."""
    key = tmp_path / "service.key"
    key.write_bytes(b"\xff\xfe" + bytes(range(128, 178)))
    line = _refusal(cli_in_process(*command, env=_env(tmp_path, key)))
    assert "SRE_JUDGE_SECRET_KEY_FILE" in line and str(key) in line, line
    assert "openssl rand -hex 32" in line, line
    assert not (tmp_path / "judge.db").exists()


@pytest.mark.parametrize("command", MAKING_COMMANDS)
def test_a_key_file_that_cannot_be_made_is_refused_before_any_schema(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A key file that cannot be made (a regular file stands where its folder should be;
    likewise an unwritable folder or a read-only file system) is refused in one line
    naming ``SRE_JUDGE_SECRET_KEY_FILE``, the file and the OS's reason, before a new
    database or its schema is made."""
    blocker = tmp_path / "secrets"
    blocker.write_text("not a folder\n")
    key = blocker / "service.key"
    line = _refusal(cli_in_process(*command, env=_env(tmp_path, key)))
    assert "SRE_JUDGE_SECRET_KEY_FILE" in line and str(key) in line, line
    assert "File exists" in line, line
    assert not (tmp_path / "judge.db").exists(), "a schema was made before the key was refused"
