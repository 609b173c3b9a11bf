"""First contact: `serve` says which judge it uses, where, and whether it answered; /readyz
says whether it answered (and where, to an admin)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import running_judge_server
from tests.support.service_process import serving

pytestmark = pytest.mark.slow  # real `sre-judge serve` processes, about 25 s each

SECRET = "hunter2-do-not-print"


def _log_line(log: Path, start: str, seconds: float = 20) -> str:
    """The message of the first record of the service's JSON log that starts with ``start``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            message = str(json.loads(line).get("message", ""))  # every line is JSON
            if message.startswith(start):
                return message
        time.sleep(0.1)
    raise AssertionError(f"no line starting {start!r} in:\n{log.read_text(errors='replace')}")


def test_serve_names_an_unreachable_judge_its_address_and_the_setting(
    database_url: str, tmp_path: Path
) -> None:
    judge = f"openai:m@http://127.0.0.1:9/v1?api-key={SECRET}"
    env = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE": judge}
    log = tmp_path / "serve.log"
    with serving(env, log) as service:
        ready = httpx.get(f"{service.url}/readyz", timeout=10)
    line = _log_line(log, "judge: ")
    assert line == (
        "judge: openai:m at http://127.0.0.1:9/v1 did not answer (judge_unavailable); "
        "submissions wait as pending until it answers (set SRE_JUDGE_JUDGE to change it)"
    )
    assert ready.status_code == 503
    body = ready.json()["judge"]
    assert "address" not in body and "127.0.0.1:9" not in ready.text  # said on stderr only
    assert body["setting"] == "SRE_JUDGE_JUDGE" and body["reason"] == "judge_unavailable"
    assert SECRET not in ready.text and SECRET not in log.read_text(errors="replace")


def test_serve_says_when_the_judge_answered(database_url: str, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with running_judge_server() as judge:
        env = {
            "SRE_JUDGE_DATABASE_URL": database_url,
            "SRE_JUDGE_JUDGE": f"ollama:m@{judge.ollama_url}",
        }
        created = cli_in_process("tokens", "create", "--role", "admin", "--name", "ops", env=env)
        admin = {"Authorization": f"Bearer {created.stdout.strip()}"}
        with serving(env, log) as service:
            ready = httpx.get(f"{service.url}/readyz", timeout=10).json()
            for_admin = httpx.get(f"{service.url}/readyz", headers=admin, timeout=10).json()
    assert _log_line(log, "judge: ") == (
        f"judge: ollama:m at {judge.ollama_url} answered (set SRE_JUDGE_JUDGE to change it)"
    )
    assert ready["judge"]["ok"] is True and "address" not in ready["judge"]
    assert for_admin["judge"]["address"] == judge.ollama_url  # an admin sees where
