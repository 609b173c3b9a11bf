"""Webhooks across real server processes: a crash mid-delivery, several servers."""

from __future__ import annotations

import asyncio
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.webhooks.outbox import subscribe as subscribe_outbox
from api.webhooks.queries import WebhookQueries
from storage import Store
from tests.support.keys import session_key
from tests.support.service_process import ServiceProcess, cli, serving
from tests.support.submissions import DIAGNOSIS, TRUTH
from tests.support.webhook_receiver import Receiver, receiving

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def _env(database_url: str) -> dict[str, str]:
    return {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_POLL_SECONDS": "0.1",
        "SRE_JUDGE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1",
        "SRE_JUDGE_WEBHOOK_TIMEOUT_SECONDS": "2",
        "SRE_JUDGE_WEBHOOK_RETRY_SECONDS": "0.2",
    }


def _headers(env: dict[str, str], role: str) -> dict[str, str]:
    done = cli("tokens", "create", "--role", role, "--name", f"wh-{role}", env=env)
    assert done.returncode == 0, done.stderr
    return {"Authorization": f"Bearer {done.stdout.strip()}"}


def _register(url: str, admin: dict[str, str], receiver: Receiver) -> None:
    response = httpx.post(
        f"{url}/v1/webhooks",
        json={"url": receiver.url, "events": ["grading.completed"]},
        headers=admin,
    )
    assert response.status_code == 201, response.text
    receiver.secret = response.json()["secret"]


def _submit(url: str, agent: dict[str, str], n: int) -> str:
    response = httpx.post(
        f"{url}/v1/submissions",
        json={"diagnosis": f"{DIAGNOSIS} #{n}", "ground_truth": TRUTH},
        headers=agent,
        timeout=30,
    )
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


async def _states(engine: Engine) -> list[str]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT state FROM webhook_delivery ORDER BY seq"))
        return [row[0] for row in rows]


async def test_killed_mid_delivery_and_restarted_delivers_exactly_once(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    env = _env(database_url)
    assert cli("migrate", env=env).returncode == 0
    admin, agent = _headers(env, "admin"), _headers(env, "submitter")
    with receiving() as receiver:
        receiver.delay = lambda n: 4.0 if n == 0 else 0.0  # the first send hangs
        first = ServiceProcess(env, tmp_path / "first.log")
        try:
            first.wait_ready()
            _register(first.url, admin, receiver)
            grading_id = _submit(first.url, agent, 0)
            for _ in range(600):
                if receiver.requests:
                    break
                await asyncio.sleep(0.05)
            assert receiver.requests == 1
        finally:
            first.kill()  # mid-delivery: the receiver holds the request
            first.stop()
        with serving(env, tmp_path / "second.log"):
            for _ in range(600):
                if await _states(engine) == ["delivered"]:
                    break
                await asyncio.sleep(0.1)
            assert await _states(engine) == ["delivered"]
        ids = {message_id for message_id, _ in receiver.received}
        assert len(ids) == 1  # every send of it carried the same webhook-id
        [event] = receiver.delivered()
        assert event["data"]["grading_id"] == grading_id and receiver.unverified == 0


async def test_several_servers_on_one_database_deliver_each_event_once(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    env = _env(database_url)
    assert cli("migrate", env=env).returncode == 0
    admin, agent = _headers(env, "admin"), _headers(env, "submitter")
    with (
        receiving() as receiver,
        serving(env, tmp_path / "a.log") as a,
        serving(env, tmp_path / "b.log") as b,
    ):
        _register(a.url, admin, receiver)
        ids = [_submit((a, b)[n % 2].url, agent, n) for n in range(12)]
        arrived = await asyncio.to_thread(receiver.wait_for, 12, 120)
        await asyncio.sleep(1.0)  # time for any duplicate to show up
        assert sorted(e["data"]["grading_id"] for e in arrived) == sorted(ids)
        assert len(receiver.received) == 12  # no webhook-id twice
        assert await _states(engine) == ["delivered"] * 12


async def test_two_processes_and_a_slow_receiver_send_each_event_once(
    db_backend: str, database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """``serve --processes 2``, three endpoints whose receivers answer in 0.6 s, each with
    22 events due when the service starts: every event reaches each once, although the
    22 sends to one endpoint take 13 s, longer than one send's lease (the 1.6 s timeout +
    10 s = 11.6 s). The lease over a batch of up to 20 sends that one lease per send
    replaced hands the batch's tail to the other process while it is still being sent:
    that code sent 24 for 22 to each endpoint here (2 runs, all three endpoints alike)."""
    if db_backend != "postgres":
        pytest.skip("several server processes share PostgreSQL")
    events, delay = 22, 0.6
    env = {
        **_env(database_url),
        "SRE_JUDGE_PROCESSES": "2",
        "SRE_JUDGE_WEBHOOK_TIMEOUT_SECONDS": "1.6",
    }
    store = Store(engine, key=session_key())
    subscribe_outbox(store.db)  # as the app wiring does
    with ExitStack() as stack:
        receivers = [stack.enter_context(receiving()) for _ in range(3)]
        for receiver in receivers:
            receiver.delay = lambda n: delay
            endpoint = await WebhookQueries(store.db).create_endpoint(
                url=receiver.url, events=["regrade.finished"], description="", actor="t"
            )
            receiver.secret = endpoint.secret
        for n in range(events):  # all due at once: one claim could take them all
            with store.db.sessions()() as session, session.begin():
                store.db.audit(
                    session, "regrade_job.done", entity_type="regrade_job",
                    entity_id=f"j{n}", actor="t", payload={"state": "done", "counts": {}},
                )  # fmt: skip
        stack.enter_context(serving(env, tmp_path / "serve.log"))
        for receiver in receivers:
            await asyncio.to_thread(receiver.wait_for, events, 120)
        await asyncio.sleep(1.0)  # time for any second send to show up
        for receiver in receivers:
            assert receiver.requests == events  # no event sent twice
            jobs = [e["data"]["regrade_job_id"] for e in receiver.delivered()]
            assert jobs == [f"j{n}" for n in range(events)]  # in event order
    assert await _states(engine) == ["delivered"] * (3 * events)
    with engine.connect() as connection:
        attempts = (connection.execute(text("SELECT count(*) FROM webhook_attempt"))).scalar()
    assert attempts == 3 * events  # one attempt each: no send timed out and was retried
