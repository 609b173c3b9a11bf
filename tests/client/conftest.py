"""Fixtures of the client tests: real ``sre-judge serve`` processes with scripted judges."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.in_process_cli import cli_in_process
from tests.support.service_process import ServiceProcess


@dataclass(frozen=True)
class Served:
    """A running server and a token of each role."""

    url: str
    submitter: str
    adjudicator: str
    admin: str


def _token(env: dict[str, str], role: str) -> str:
    done = cli_in_process("tokens", "create", "--role", role, "--name", f"client-{role}", env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Served]]:
    """``serve("pass" | "fail" | "garbage")``: one server per scripted judge, per module."""
    running: dict[str, tuple[ServiceProcess, Served]] = {}

    def start(mode: str) -> Served:
        if mode not in running:
            folder: Path = tmp_path_factory.mktemp(f"serve-{mode}")
            env = {
                "SRE_JUDGE_DATABASE_URL": f"sqlite:///{folder / 'judge.db'}",
                "SRE_JUDGE_JUDGE": f"scripted:{mode}",
                "SRE_JUDGE_POLL_SECONDS": "0.05",
                "SRE_JUDGE_PROVISIONAL_REVIEW_RATE": "0",
                # an uncalibrated scripted judge: its unflagged passes stand in these tests
                "SRE_JUDGE_PASS_POLICY": "unflagged",
            }
            migrated = cli_in_process("migrate", env=env)
            assert migrated.returncode == 0, migrated.stderr
            tokens = {role: _token(env, role) for role in ("submitter", "adjudicator", "admin")}
            process = ServiceProcess(env, folder / "serve.log")
            process.wait_ready()
            running[mode] = (process, Served(process.url, **tokens))
        return running[mode][1]

    yield start
    for process, _ in running.values():
        process.stop()
