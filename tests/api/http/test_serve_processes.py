"""``sre-judge serve --processes N``: several server processes on one port and database."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from sqlalchemy import text
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
from tests.support.service_process import ServiceProcess, cli, serving


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
@pytest.mark.postgres
async def test_the_judge_concurrency_bounds_the_calls_of_every_process_to_one_endpoint(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """``SRE_JUDGE_JUDGE_CONCURRENCY`` is the number of concurrent calls one judge
    endpoint is sent: with ``serve --processes 2`` and a concurrency of 2, the endpoint
    never has more than 2 calls at once, however much work waits."""
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    text = sregym_reply(SEVEN, evidence="sets USER_PORT=9999")
    lock = threading.Lock()
    state = {"now": 0, "most": 0}

    def reply(_body: dict[str, Any]) -> str:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.4)  # a model generating
        with lock:
            state["now"] -= 1
        return text

    with running_judge_server(default=reply) as judge:
        env = _env(
            database_url,
            judge.openai_url,
            SRE_JUDGE_PROCESSES="2",
            SRE_JUDGE_JUDGE_CONCURRENCY="2",
        )
        token = _token(env)
        with serving(env, tmp_path / "serve.log") as service:
            await _submit([service.url], token, 12)
            await _wait_all_done(engine, 12)
    assert await _scalar(engine, "SELECT count(*) FROM grading WHERE status = 'graded'") == 12
    assert state["most"] <= 2, f"{state['most']} judge calls at once to one endpoint"


@contextmanager
def _judge_listing_models_failing_completions() -> Iterator[str]:
    """An OpenAI-compatible judge that lists its model (``GET /v1/models``) and fails
    every completion with 503, as a proxy in front of a model server that is down; its
    base URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.startswith("/v1/models"):
                model = {"id": "m", "object": "model", "created": 0, "owned_by": "test"}
                self._send(200, {"object": "list", "data": [model]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self._send(503, {"error": {"message": "upstream model server is down"}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.slow
@pytest.mark.postgres
async def test_every_process_answers_readyz_alike_after_a_judge_call_failed(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Under ``serve --processes 2`` the one ``/readyz`` target a load balancer or an
    uptime checker probes answers 503 on every connection while a grading whose judge
    call failed waits, whichever process answers it: the judge listing its models does
    not make the process whose worker did not make the call say it is ready."""
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    with _judge_listing_models_failing_completions() as judge_url:
        env = _env(
            database_url,
            judge_url,
            SRE_JUDGE_PROCESSES="2",
            SRE_JUDGE_JUDGE_MAX_ATTEMPTS="1",
            SRE_JUDGE_JUDGE_RETRY_SECONDS="600",
        )
        token = _token(env)
        with serving(env, tmp_path / "serve.log") as service:
            await _submit([service.url], token, 1)
            for _ in range(200):  # up to 20 s: the grading's judge call failed
                reason = await _scalar(engine, "SELECT max(pending_reason) FROM grading")
                if reason:
                    break
                await asyncio.sleep(0.1)
            assert reason, "the grading's judge call never failed"
            statuses = []
            for _ in range(40):  # a new connection each time, as a probe makes
                async with httpx.AsyncClient(timeout=10) as client:
                    response = await client.get(f"{service.url}/readyz")
                statuses.append((response.status_code, response.json()["judge"]["ok"]))
    assert await _scalar(engine, "SELECT count(*) FROM grading WHERE status = 'pending'") == 1
    assert set(statuses) == {(503, False)}, statuses


@pytest.mark.slow
def test_several_processes_on_sqlite_are_refused(tmp_path: Path) -> None:
    env = {"SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'one.db'}"}
    done = cli("serve", "--processes", "2", "--port", "0", env=env)
    assert done.returncode == 2
    assert "PostgreSQL" in done.stderr and "--processes" in done.stderr


def test_more_processes_than_the_judge_concurrency_are_refused() -> None:
    """Each ``serve`` process needs at least one of the judge concurrency's calls:
    ``--processes`` above ``SRE_JUDGE_JUDGE_CONCURRENCY`` is refused before anything
    starts (exit 2), on one line naming both settings."""
    env: dict[str, str | None] = {
        "SRE_JUDGE_DATABASE_URL": "postgresql+psycopg://judge@127.0.0.1:9/judge",
        "SRE_JUDGE_JUDGE_CONCURRENCY": "2",
    }
    done = cli_in_process("serve", "--processes", "3", "--port", "0", env=env)
    assert done.returncode == 2
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("error: ")
    assert "SRE_JUDGE_PROCESSES" in line and "SRE_JUDGE_JUDGE_CONCURRENCY" in line


def _what_a_new_client_meets(port: int) -> str:
    """``refused``, ``answered``, ``closed``, ``reset`` or ``hung`` (accepted by the
    kernel, never served)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=2)
    except ConnectionRefusedError:
        return "refused"
    with sock:
        sock.settimeout(3)
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        try:
            data = sock.recv(100)
        except TimeoutError:
            return "hung"
        except ConnectionResetError:
            return "reset"
        return "answered" if data else "closed"


@pytest.mark.slow
@pytest.mark.postgres
async def test_the_port_refuses_new_connections_while_the_processes_drain(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """SIGTERM to ``serve --processes 2`` with a grading in flight: while it finishes, a new
    connection is refused at once, as by one ``serve`` process, so that a client or a load
    balancer goes elsewhere; it is not queued for nobody and reset when the drain ends."""
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    reply = sregym_reply(SEVEN, evidence="sets USER_PORT=9999")
    # the grading outlasts the drain: the shutdown waits for it, then releases its lease
    with running_judge_server(default=reply, delay=8) as judge:
        env = _env(
            database_url,
            judge.openai_url,
            SRE_JUDGE_PROCESSES="2",
            SRE_JUDGE_JUDGE_CONCURRENCY="2",  # one call at a time in each process
            SRE_JUDGE_SHUTDOWN_SECONDS="3",
        )
        token = _token(env)
        service = ServiceProcess(env, tmp_path / "serve.log")
        try:
            service.wait_ready()
            await _submit([service.url], token, 1)
            for _ in range(300):  # up to 15 s
                if judge.requests:
                    break
                await asyncio.sleep(0.05)
            assert judge.requests, "the grading never reached the judge"
            service.process.terminate()
            await asyncio.sleep(1)  # the servers have stopped listening; the grading runs
            assert service.process.poll() is None, "the drain ended before the check"
            met = _what_a_new_client_meets(service.port)
        finally:
            service.stop()
        assert service.process.returncode == 0
    assert met == "refused"
    assert await _scalar(engine, "SELECT count(*) FROM grading WHERE status = 'pending'") == 1


@pytest.mark.slow
@pytest.mark.postgres
def test_ctrl_c_while_real_children_start_exits_0(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """Ctrl-C in a terminal (SIGINT to its whole process group) as soon as ``serve
    --processes 2`` has started its children, still importing: every process stops, none
    prints a traceback, and the parent exits 0. Three tries, as the moment races the
    children's start."""
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    # (``engine``: a database already migrated, so that each try starts its children soon)
    env = {**os.environ, **_env(database_url, "http://127.0.0.1:9/v1")}
    for attempt in range(3):
        log_path = tmp_path / f"serve{attempt}.log"
        with log_path.open("wb") as log:
            serve = subprocess.Popen(
                [sys.executable, "-m", "api", "serve", "--port", "0", "--processes", "2"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a process group of its own, as a terminal's job
            )
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline and serve.poll() is None:
                    children = subprocess.run(
                        ["pgrep", "-P", str(serve.pid), "-f", "spawn_main"],
                        capture_output=True,
                        text=True,
                        check=False,
                    ).stdout.split()
                    if len(children) >= 2:
                        break
                    time.sleep(0.02)
                os.killpg(serve.pid, signal.SIGINT)
                status = serve.wait(timeout=30)
            finally:
                if serve.poll() is None:
                    os.killpg(serve.pid, signal.SIGKILL)
                    serve.wait()
        printed = log_path.read_text()
        assert status == 0, printed
        assert "Traceback" not in printed


class _Child:
    """A stand-in for a spawned server process. It runs until it is sent SIGTERM, then
    ends with ``told_status`` (0: a graceful stop; ``-SIGTERM``: killed by the signal,
    as a child still starting is), or ends on its own with ``fails_with`` after a few
    polls; so that the test ends either way, it also ends after about 3 s of polling.
    ``settings``: the ones it was started with.
    ``signal_on_start``: the signal (the operator's SIGTERM, a terminal's Ctrl-C) that
    reaches the parent as it starts this one."""

    def __init__(
        self,
        name: str,
        started: list[_Child],
        *,
        settings: Settings,
        told_status: int,
        fails_with: int | None,
        signal_on_start: int | None,
    ) -> None:
        self.name = name
        self.settings = settings
        self.running = False
        self.terminated = False
        self.exitcode: int | None = None
        self._polls = 0
        self._started = started
        self._told_status = told_status
        self._fails_with = fails_with
        self._signal_on_start = signal_on_start

    def start(self) -> None:
        self.running = True
        self._started.append(self)
        if self._signal_on_start is not None:
            os.kill(os.getpid(), self._signal_on_start)

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
    signal_on_first_start: int | None = None,
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
            settings=args[0],
            told_status=told_status,
            fails_with=(failing or {}).get(number),
            signal_on_start=signal_on_first_start if number == 0 else None,
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
    started = _fake_children(monkeypatch, signal_on_first_start=signal.SIGTERM)
    assert processes.run_processes(_SETTINGS, 3) == 0
    assert [child.name for child in started if not child.terminated] == []


def test_children_stopped_while_starting_are_a_clean_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child told to stop before it can handle SIGTERM ends by the signal; the parent
    stopped by an operator still exits 0."""
    _fake_children(monkeypatch, signal_on_first_start=signal.SIGTERM, told_status=-signal.SIGTERM)
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


def test_ctrl_c_while_children_start_stops_every_child_and_exits_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ctrl-C reaches ``serve --processes 3`` while it starts its children: every child
    that runs is stopped and the parent exits 0, also when a child ends by the SIGINT
    itself."""
    started = _fake_children(
        monkeypatch, signal_on_first_start=signal.SIGINT, told_status=-signal.SIGINT
    )
    assert processes.run_processes(_SETTINGS, 3) == 0
    assert [child.name for child in started if not child.terminated] == []


def test_each_process_calls_the_judge_its_share_of_the_concurrency(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``serve --processes 3`` with ``SRE_JUDGE_JUDGE_CONCURRENCY=5`` starts processes
    that call one judge endpoint at most 2, 2 and 1 at a time, 5 in all, each with as
    many grading workers (``SRE_JUDGE_WORKERS`` unset)."""
    started = _fake_children(monkeypatch)
    settings = Settings(host="127.0.0.1", port=0, judge_concurrency=5)
    assert processes.run_processes(settings, 3) == 0
    assert [child.settings.judge_concurrency for child in started] == [2, 2, 1]
    assert [child.settings.worker_count for child in started] == [2, 2, 1]


@pytest.mark.parametrize(
    ("concurrency", "count", "shares"),
    [(4, 1, [4]), (4, 2, [2, 2]), (7, 3, [3, 2, 2]), (3, 3, [1, 1, 1]), (64, 5, [13] * 4 + [12])],
)
def test_the_judge_concurrency_is_shared_out_whole(
    concurrency: int, count: int, shares: list[int]
) -> None:
    """The processes' shares add up to the judge concurrency, none differing from another
    by more than one call."""
    assert processes.judge_shares(concurrency, count) == shares


def test_a_child_killed_by_a_signal_gives_the_status_a_shell_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A child killed by a signal (the OOM killer's SIGKILL) makes the parent exit with
    128 plus the signal's number, 137, as shells, systemd and docker show a process so
    killed."""
    _fake_children(monkeypatch, failing={1: -signal.SIGKILL})
    assert processes.run_processes(_SETTINGS, 3) == 128 + signal.SIGKILL


@pytest.mark.postgres
def test_the_parent_holds_no_database_connection_while_its_children_serve(
    db_backend: str, database_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve --processes 2`` builds the app once to check its settings, then leaves the
    serving to its children: the parent holds no database connection meanwhile."""
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    others = (
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )

    def connections() -> int:
        with engine.connect() as connection:
            return int(connection.execute(text(others)).scalar_one())

    before = connections()
    while_serving: list[int] = []

    def run_processes(settings: Settings, count: int) -> int:
        while_serving.append(connections())
        return 0

    monkeypatch.setattr(processes, "run_processes", run_processes)
    env = _env(database_url, "http://127.0.0.1:9/v1", SRE_JUDGE_LOG_LEVEL="WARNING")
    done = cli_in_process("serve", "--processes", "2", "--port", "0", env=dict(env))
    assert done.returncode == 0, done.stderr
    assert while_serving == [before]
