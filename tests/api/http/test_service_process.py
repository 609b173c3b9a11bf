"""The service as real processes: crash recovery, several servers on one database, audit."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from tests.support.in_process_cli import cli_in_process
from tests.support.judge_server import running_judge_server, sregym_reply
from tests.support.service_process import ServiceProcess, serving

pytestmark = [pytest.mark.slow, pytest.mark.postgres]

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
DIAGNOSIS = "The user-service deployment in hotel sets USER_PORT=9999; the frontend fails."
SEVEN = {"D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q3"}


def _env(database_url: str, judge_url: str, **extra: str) -> dict[str, str]:
    return {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": f"openai:m@{judge_url}",
        "SRE_JUDGE_LEASE_SECONDS": "3",
        "SRE_JUDGE_POLL_SECONDS": "0.1",
        **extra,
    }


def _token(env: dict[str, str], role: str = "submitter") -> str:
    done = cli_in_process("tokens", "create", "--role", role, "--name", f"test-{role}", env=env)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip()
    assert token and "\n" not in token
    return token


async def _submit(urls: list[str], token: str, count: int) -> list[str]:
    headers = {"Authorization": f"Bearer {token}"}
    limit = asyncio.Semaphore(16)

    async def one(client: httpx.AsyncClient, n: int) -> str:
        async with limit:
            response = await client.post(
                f"{urls[n % len(urls)]}/v1/submissions",
                json={"diagnosis": f"{DIAGNOSIS} #{n}", "ground_truth": TRUTH, "run_id": str(n)},
                headers=headers,
            )
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    async with httpx.AsyncClient(timeout=30) as client:
        return list(await asyncio.gather(*(one(client, n) for n in range(count))))


async def _scalar(engine: Engine, sql: str) -> Any:
    with engine.connect() as connection:
        return (connection.execute(text(sql))).scalar_one()


async def _wait_all_done(engine: Engine, total: int, stall_seconds: float = 60) -> None:
    """Until every grading is done; fails when none finishes for ``stall_seconds`` (what is
    checked is that nothing is lost or doubled, not how fast a loaded machine grades)."""
    done, last_progress = -1, time.monotonic()
    while done < total:
        now_done = await _scalar(engine, "SELECT count(*) FROM grading WHERE status <> 'pending'")
        if now_done != done:
            done, last_progress = now_done, time.monotonic()
        elif time.monotonic() - last_progress > stall_seconds:
            raise AssertionError(f"gradings still pending: {done} of {total} done")
        await asyncio.sleep(0.25)


async def _assert_graded_exactly_once(engine: Engine, ids: list[str]) -> None:
    assert await _scalar(engine, "SELECT count(*) FROM grading") == len(ids)
    assert await _scalar(engine, "SELECT count(*) FROM grading WHERE status = 'graded'") == len(ids)
    assert await _scalar(engine, "SELECT count(*) FROM answer") == 9 * len(ids)
    completed = await _scalar(
        engine,
        "SELECT count(*) FROM audit_log WHERE event IN ('grading.completed', 'grading.unscored')",
    )
    distinct = await _scalar(
        engine,
        "SELECT count(DISTINCT entity_id) FROM audit_log "
        "WHERE event IN ('grading.completed', 'grading.unscored')",
    )
    assert completed == distinct == len(ids)


async def test_sigkill_with_100_pending_loses_nothing_and_grades_once(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    reply = sregym_reply(SEVEN, evidence="sets USER_PORT=9999")
    with running_judge_server(default=reply, delay=0.3) as judge:
        env = _env(database_url, judge.openai_url, SRE_JUDGE_JUDGE_CONCURRENCY="2")
        token = _token(env)
        service = ServiceProcess(env, tmp_path / "first.log")
        service.wait_ready()
        ids = await _submit([service.url], token, 100)
        service.kill()
        pending = await _scalar(engine, "SELECT count(*) FROM grading WHERE status = 'pending'")
        assert pending > 75  # the kill really hit work in flight
        judge.delay = 0.01
        restart = {**env, "SRE_JUDGE_JUDGE_CONCURRENCY": "8"}
        with serving(restart, tmp_path / "second.log"):
            await _wait_all_done(engine, 100)
    await _assert_graded_exactly_once(engine, ids)
    assert cli_in_process("audit", "verify", env=env).returncode == 0


async def test_two_servers_on_postgres_grade_200_without_doubles(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    reply = sregym_reply(SEVEN, evidence="sets USER_PORT=9999")
    with running_judge_server(default=reply, delay=0.01) as judge:
        env = _env(database_url, judge.openai_url, SRE_JUDGE_JUDGE_CONCURRENCY="8")
        token = _token(env)
        with serving(env, tmp_path / "a.log") as a, serving(env, tmp_path / "b.log") as b:
            ids = await _submit([a.url, b.url], token, 200)
            await _wait_all_done(engine, 200)
        owners = await _scalar(
            engine,
            "SELECT count(DISTINCT split_part(actor, ':', 2)) FROM audit_log "
            "WHERE event = 'grading.completed'",
        )
    await _assert_graded_exactly_once(engine, ids)
    assert owners == 2  # both processes did part of the work


async def test_audit_verify_passes_then_fails_after_a_hand_edit(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    with running_judge_server(default=sregym_reply(SEVEN, evidence="USER_PORT=9999")) as judge:
        env = _env(database_url, judge.openai_url)
        token = _token(env)
        with serving(env, tmp_path / "svc.log") as service:
            ids = await _submit([service.url], token, 3)
            await _wait_all_done(engine, 3)
    ok = cli_in_process("audit", "verify", env=env)
    assert ok.returncode == 0, ok.stderr
    assert "intact" in ok.stdout
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE audit_log SET actor = 'mallory' "
                "WHERE seq = (SELECT min(seq) + 2 FROM audit_log)"
            )
        )
    broken = cli_in_process("audit", "verify", env=env)
    assert broken.returncode == 1
    assert "broken at row" in broken.stderr
    assert len(ids) == 3
