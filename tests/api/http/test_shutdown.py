"""SIGTERM during a batch, with a real ``sre-judge serve`` process: nothing lost, nothing half-done.

The judge answers ``#medium`` diagnoses 0.3 s after SIGTERM and ``#slow`` ones after 20 s.
Four are in flight (two of each) and four more are queued when SIGTERM arrives, with a shutdown
deadline of 2 s: the medium ones finish and are stored, the slow ones are cut and their
leases released, the queued ones are never claimed. The process exits 0. Every grading
is then graded exactly once, or pending with no lease, nothing of it stored, and
claimable at once although leases last 300 s.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from storage import Store
from tests.storage.helpers import graded_result, submit
from tests.support.judge_server import JudgeServer, running_judge_server, sregym_reply
from tests.support.keys import session_key
from tests.support.service_process import ServiceProcess

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"
SEVEN = {"D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q3"}
REPLY = sregym_reply(SEVEN, evidence="USER_PORT=9999")


def _judge(sigterm: threading.Event, done: threading.Event) -> Any:
    """``#medium``: 0.3 s after SIGTERM was sent; ``#slow``: when the test is done."""

    def answer(body: dict[str, Any]) -> str:
        prompt = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        if "#slow" in prompt:
            done.wait(timeout=20)
        elif "#medium" in prompt:
            sigterm.wait(timeout=20)
            time.sleep(0.3)
        return REPLY

    return answer


async def _rows(engine: Engine, sql: str) -> list[Any]:
    with engine.connect() as connection:
        return list((connection.execute(text(sql))).all())


async def _submit(url: str, token: str, tags: list[str]) -> list[str]:
    ids = []
    async with httpx.AsyncClient(timeout=30) as client:
        for n, tag in enumerate(tags):
            response = await client.post(
                f"{url}/v1/submissions",
                json={"diagnosis": f"USER_PORT=9999 {tag} {n}", "ground_truth": TRUTH},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert response.status_code == 202, response.text
            ids.append(str(response.json()["id"]))
    return ids


async def _wait_for_requests(judge: JudgeServer, count: int) -> None:
    for _ in range(200):
        if len(judge.requests) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the judge saw {len(judge.requests)} requests, not {count}")


async def _states(engine: Engine) -> dict[str, tuple[str, str | None, Any]]:
    rows = await _rows(engine, "SELECT id, status, lease_owner, lease_expires_at FROM grading")
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


@pytest.mark.slow
async def test_sigterm_finishes_or_releases_in_flight_gradings_and_exits_0(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    sigterm, done = threading.Event(), threading.Event()
    with running_judge_server(default=_judge(sigterm, done)) as judge:
        env = {
            "SRE_JUDGE_DATABASE_URL": database_url,
            "SRE_JUDGE_JUDGE": f"openai:m@{judge.openai_url}",
            "SRE_JUDGE_JUDGE_CONCURRENCY": "4",
            "SRE_JUDGE_LEASE_SECONDS": "300",
            "SRE_JUDGE_POLL_SECONDS": "0.1",
            "SRE_JUDGE_SHUTDOWN_SECONDS": "2",
        }
        token, _ = await Store(engine, key=session_key()).tokens.create(
            name="batch", role="submitter"
        )
        service = ServiceProcess(env, tmp_path / "serve.log")
        service.wait_ready()
        in_flight = await _submit(service.url, token, ["#medium", "#slow", "#medium", "#slow"])
        await _wait_for_requests(judge, 4)
        queued = await _submit(service.url, token, ["#queued"] * 4)
        started = time.monotonic()
        service.process.send_signal(signal.SIGTERM)
        sigterm.set()
        code = service.process.wait(timeout=20)
        stopped_in = time.monotonic() - started
        service.stop()
        done.set()
    log = (tmp_path / "serve.log").read_text()
    assert code == 0, log[-3000:]
    # the deadline is 2 s; without it the slow calls would hold the process for 20 s
    assert stopped_in < 15

    after = await _states(engine)
    assert [after[g][0] for g in in_flight] == ["graded", "pending", "graded", "pending"]
    assert all(after[g][0] == "pending" for g in queued)
    pending = sorted(g for g, (status, _, _) in after.items() if status == "pending")
    assert all(after[g][1:] == (None, None) for g in pending)  # no lease left behind
    # nothing half-done: two complete gradings, nothing stored for the pending ones
    assert await _rows(engine, "SELECT count(*) FROM judge_call") == [(2,)]
    assert await _rows(engine, "SELECT count(*) FROM answer") == [(9 * 2,)]
    completions = await _rows(
        engine,
        "SELECT entity_id, count(*) FROM audit_log "
        "WHERE event IN ('grading.completed', 'grading.unscored', 'grading.deferred') "
        "GROUP BY entity_id",
    )
    assert sorted(completions) == sorted((g, 1) for g in in_flight[::2])
    assert "lease released unfinished at shutdown" in log
    # a restart takes the released gradings at once (their 300 s leases are gone)
    claims = await Store(engine, key=session_key()).queue.claim_pending(
        "restart", limit=10, lease_seconds=300
    )
    assert sorted(c.grading_id for c in claims) == pending


async def test_release_lease_clears_only_the_holders_lease_and_writes_nothing_else(
    store: Store, engine: Engine
) -> None:
    grading_id = (await submit(store)).grading.id
    [claim] = await store.queue.claim_pending("w1", limit=1, lease_seconds=300)
    before = await _rows(engine, "SELECT revision, claim_count, status FROM grading")
    audit = await _rows(engine, "SELECT count(*) FROM audit_log")
    assert await store.queue.release_lease(grading_id, "w2") is False  # not its lease
    assert (await _states(engine))[grading_id][1] == "w1"
    assert await store.queue.release_lease(claim.grading_id, "w1") is True
    assert (await _states(engine))[grading_id] == ("pending", None, None)
    assert await _rows(engine, "SELECT revision, claim_count, status FROM grading") == before
    assert await _rows(engine, "SELECT count(*) FROM audit_log") == audit
    assert await store.queue.release_lease(grading_id, "w1") is False  # nothing left to release
    [again] = await store.queue.claim_pending("w3", limit=1, lease_seconds=300)
    assert again.grading_id == grading_id


async def test_release_lease_leaves_a_stored_verdict_alone(store: Store, engine: Engine) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=300)
    assert await store.queue.complete(grading_id, "w1", graded_result())
    assert await store.queue.release_lease(grading_id, "w1") is False
    assert (await _states(engine))[grading_id][0] == "graded"


async def test_release_held_gives_back_every_pending_lease_of_the_holder_but_those_kept(
    store: Store, engine: Engine
) -> None:
    """A stopping worker gives back every lease it holds, whichever claim took it, except
    those of the gradings it is storing; other workers' leases and stored verdicts stay."""
    for _ in range(5):
        await submit(store)
    mine = await store.queue.claim_pending("w1", limit=4, lease_seconds=300)
    [other] = await store.queue.claim_pending("w2", limit=1, lease_seconds=300)
    stored, storing, *given = [c.grading_id for c in mine]
    assert await store.queue.complete(stored, "w1", graded_result())
    assert sorted(await store.queue.release_held("w1", keep={storing})) == sorted(given)
    after = await _states(engine)
    assert [after[g][:2] for g in given] == [("pending", None)] * 2
    assert after[storing][:2] == ("pending", "w1")
    assert after[other.grading_id][:2] == ("pending", "w2")
    assert after[stored][0] == "graded"
    assert await store.queue.release_held("w1") == [storing]
