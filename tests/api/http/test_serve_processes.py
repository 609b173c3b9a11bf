"""``sre-judge serve --processes N``: several server processes on one port and database."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

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

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


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


def test_several_processes_on_sqlite_are_refused(tmp_path: Path) -> None:
    env = {"SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'one.db'}"}
    done = cli("serve", "--processes", "2", "--port", "0", env=env)
    assert done.returncode == 2
    assert "PostgreSQL" in done.stderr and "--processes" in done.stderr
