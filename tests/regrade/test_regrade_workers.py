"""Many workers share a regrade job through PostgreSQL leases; a killed one loses nothing."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import Store
from tests.storage.helpers import sregym_rubric
from tests.support.judge_server import running_judge_server, sregym_reply
from tests.support.keys import session_key
from tests.support.sregym_results import write_sregym_results

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

ALL = {f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)}


async def _scalar(engine: Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as connection:
        return (connection.execute(text(sql), params)).scalar_one()


async def _seed(store: Store, tmp_path: Path) -> int:
    total = 0
    for n, run in enumerate(("2025-06-01_12-00-00", "2025-06-08_12-00-00", "2025-06-15_12-00-00")):
        fixture = write_sregym_results(tmp_path / str(n), run=run)
        report = await ImportQueries(store.db, store.catalog).sregym(
            read_sregym_folder(fixture.root),
            read_problems(fixture.problems_file),
            rubric=sregym_rubric(),
        )
        total += report.sregym_verdicts
    return total


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "api", "worker"],
        env={**os.environ, **env},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def _held_by(store: Store, victim: subprocess.Popen[bytes]) -> Any:
    """How many items ``victim`` holds leased and not yet graded."""
    return await _scalar(
        store.engine,
        "SELECT count(*) FROM grading WHERE status = 'pending' AND lease_owner LIKE :owner",
        owner=f"%:{victim.pid}:%",
    )


async def _kill_after_a_quarter(
    store: Store, job_id: Any, total: int, victim: subprocess.Popen[bytes]
) -> Any:
    """Kill ``victim`` once a quarter is graded and it holds an item in flight; the items
    it held leased when it died (a worker slow to start, or between two items, holds none:
    the kill waits for it to hold one)."""
    for _ in range(1200):
        done = (await RegradeJobQueries(store.db).get_job(job_id)).progress.done
        if done >= total // 4 and await _held_by(store, victim) > 0:
            break
        await asyncio.sleep(0.05)
    victim.kill()
    victim.wait(timeout=30)
    return await _held_by(store, victim)


async def _until_done(store: Store, job_id: Any) -> Any:
    """The job's view once it is done, or the last one seen after a minute."""
    for _ in range(600):
        view = await RegradeJobQueries(store.db).get_job(job_id)
        if view.job.state == "done":
            break
        await asyncio.sleep(0.1)
    return view


async def _assert_each_item_graded_once(engine: Engine, job_id: Any, total: int) -> None:
    """One completion and nine answers per item, completed by at least two workers."""
    items = "SELECT id FROM grading WHERE regrade_job_id = :job"
    completed = await _scalar(
        engine,
        "SELECT count(*) FROM audit_log "
        f"WHERE event = 'grading.completed' AND entity_id IN ({items})",
        job=job_id,
    )
    distinct = await _scalar(
        engine,
        "SELECT count(DISTINCT entity_id) FROM audit_log "
        f"WHERE event = 'grading.completed' AND entity_id IN ({items})",
        job=job_id,
    )
    answers = await _scalar(
        engine, f"SELECT count(*) FROM answer WHERE grading_id IN ({items})", job=job_id
    )
    assert completed == distinct == total and answers == 9 * total
    owners = await _scalar(
        engine,
        "SELECT count(DISTINCT split_part(actor, ':', 2)) FROM audit_log "
        f"WHERE event = 'grading.completed' AND entity_id IN ({items})",
        job=job_id,
    )
    assert owners >= 2


async def test_three_workers_one_killed_grade_every_item_exactly_once(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    if db_backend != "postgres":
        pytest.skip("worker processes on several machines share PostgreSQL")
    store = Store(engine, key=session_key())
    total = await _seed(store, tmp_path)
    with running_judge_server(default=sregym_reply(ALL), delay=0.25) as judge:
        spec = f"openai:m@{judge.openai_url}"
        target = RegradeTarget(sregym_rubric(), spec, "openai", "m", "shadow")
        job = (
            await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="test")
        ).job
        env = {
            "SRE_JUDGE_DATABASE_URL": database_url,
            "SRE_JUDGE_JUDGE": spec,
            "SRE_JUDGE_LEASE_SECONDS": "3",
            "SRE_JUDGE_POLL_SECONDS": "0.1",
            "SRE_JUDGE_JUDGE_CONCURRENCY": "2",
        }
        workers = [_worker(env, tmp_path / f"worker{n}.log") for n in range(3)]
        try:
            held = await _kill_after_a_quarter(store, job.id, total, workers[0])
            view = await _until_done(store, job.id)
        finally:
            for process in workers:
                if process.poll() is None:
                    process.terminate()
                    process.wait(timeout=30)
    assert held > 0  # the kill really hit items in flight
    assert view.job.state == "done", view
    assert (view.progress.done, view.progress.failed, view.job.total) == (total, 0, total)
    await _assert_each_item_graded_once(engine, job.id, total)
