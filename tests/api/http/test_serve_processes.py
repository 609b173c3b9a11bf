"""``sre-judge serve --processes N``: several server processes on one port and database."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.http import processes
from api.service.settings import Settings
from tests.api.http.test_service_process import (
    SEVEN,
    _assert_graded_exactly_once,
    _env,
    _scalar,
    _submit,
    _token,
    _wait_all_done,
)
from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import running_judge_server, sregym_reply
from tests.support.service_process import cli, serving


@pytest.mark.slow
@pytest.mark.postgres
async def test_two_processes_on_one_port_grade_every_submission_once(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    reply = sregym_reply(SEVEN, evidence="sets USER_PORT=9999")
    # a judge slow enough that one process's two workers cannot take all the work
    with running_judge_server(default=reply, delay=0.05) as judge:
        env = _env(
            database_url,
            judge.openai_url,
            SRE_JUDGE_PROCESSES="2",
            SRE_JUDGE_JUDGE_CONCURRENCY="2",
        )
        token = _token(env)
        with serving(env, tmp_path / "serve.log") as service:
            ids = await _submit([service.url], token, 120)
            await _wait_all_done(engine, 120)
        pids = await _scalar(
            engine,
            "SELECT count(DISTINCT split_part(actor, ':', 2)) FROM audit_log "
            "WHERE event = 'grading.completed'",
        )
        assert service.process.returncode == 0  # SIGTERM stopped both processes cleanly
    await _assert_graded_exactly_once(engine, ids)
    assert pids == 2  # both processes graded part of the work
    assert cli_in_process("audit", "verify", env=env).returncode == 0


@pytest.mark.slow
def test_several_processes_on_sqlite_are_refused(tmp_path: Path) -> None:
    env = {"SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'one.db'}"}
    done = cli("serve", "--processes", "2", "--port", "0", env=env)
    assert done.returncode == 2
    assert "PostgreSQL" in done.stderr and "--processes" in done.stderr


class _Child:
    """A stand-in for a spawned server process. It runs until it is sent SIGTERM, then
    ends with ``told_status`` (0: a graceful stop; ``-SIGTERM``: killed by the signal,
    as a child still starting is), or ends on its own with ``fails_with`` after a few
    polls; so that the test ends either way, it also ends after about 3 s of polling.
    ``sigterm_on_start``: the operator's SIGTERM reaches the parent as it starts this one."""

    def __init__(
        self,
        name: str,
        started: list[_Child],
        *,
        told_status: int,
        fails_with: int | None,
        sigterm_on_start: bool,
    ) -> None:
        self.name = name
        self.running = False
        self.terminated = False
        self.exitcode: int | None = None
        self._polls = 0
        self._started = started
        self._told_status = told_status
        self._fails_with = fails_with
        self._sigterm_on_start = sigterm_on_start

    def start(self) -> None:
        self.running = True
        self._started.append(self)
        if self._sigterm_on_start:
            os.kill(os.getpid(), signal.SIGTERM)

    def is_alive(self) -> bool:
        if self.running:
            self._polls += 1
            if self._fails_with is not None and self._polls > 2:
                self.running = False
                self.exitcode = self._fails_with
            elif self._polls > 15:
                self.running = False
                self.exitcode = 0
        return self.running

    def terminate(self) -> None:
        self.terminated = True
        self.running = False
        self.exitcode = self._told_status


def _fake_children(
    monkeypatch: pytest.MonkeyPatch,
    *,
    sigterm_on_first_start: bool = False,
    told_status: int = 0,
    failing: dict[int, int] | None = None,
) -> list[_Child]:
    """Make ``run_processes`` start :class:`_Child` stand-ins (``failing``: the children,
    by number, that end on their own, with their status); the ones it starts."""
    started: list[_Child] = []

    def process(target: Any, args: tuple[Any, ...], name: str) -> _Child:
        number = int(name.rsplit("-", 1)[1])
        return _Child(
            name,
            started,
            told_status=told_status,
            fails_with=(failing or {}).get(number),
            sigterm_on_start=sigterm_on_first_start and number == 0,
        )

    context = SimpleNamespace(Process=process)
    monkeypatch.setattr(
        processes, "multiprocessing", SimpleNamespace(get_context=lambda _kind: context)
    )
    return started


_SETTINGS = Settings(host="127.0.0.1", port=0)


def test_sigterm_while_children_start_stops_every_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM (``docker stop``, systemd) sent to ``serve --processes 3`` while it is still
    starting its children stops every child that runs, and the parent exits 0."""
    started = _fake_children(monkeypatch, sigterm_on_first_start=True)
    assert processes.run_processes(_SETTINGS, 3) == 0
    assert [child.name for child in started if not child.terminated] == []


def test_children_stopped_while_starting_are_a_clean_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child told to stop before it can handle SIGTERM ends by the signal; the parent
    stopped by an operator still exits 0."""
    _fake_children(monkeypatch, sigterm_on_first_start=True, told_status=-signal.SIGTERM)
    assert processes.run_processes(_SETTINGS, 3) == 0


def test_a_failing_child_gives_the_parent_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    """When a child fails, the others are stopped and the parent exits with the failed
    child's status, not with that of a sibling the stop ended."""
    started = _fake_children(monkeypatch, told_status=-signal.SIGTERM, failing={1: 3})
    assert processes.run_processes(_SETTINGS, 3) == 3
    assert [child.name for child in started if child.terminated] == [
        "sre-judge-serve-0",
        "sre-judge-serve-2",
    ]
