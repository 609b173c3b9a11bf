"""Pending work follows the configured judge, or an admin moves it; /readyz says when it waits.

The first app is the service started without its judge (a real Ollama client asking a
closed port): submissions stay pending, bound to that judge. The second app is the
restart with ``SRE_JUDGE_JUDGE`` set to another judge, on the same database.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calls import JudgeRequest
from judge.errors import JudgeUnavailable
from storage import Store, verify_chain
from storage.keys import ServiceKey
from tests.api.conftest import ClientFactory
from tests.support.audit import configured_chain_key
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: the default judge on an address where nothing listens (the real Ollama client)
OLD = "ollama:qwen2.5:7b-instruct@http://127.0.0.1:9"
OLD_NAME = "ollama:qwen2.5:7b-instruct"
NEW = "scripted:pass"
UNREACHABLE = "judge_unavailable: judge unreachable (connection error)"
#: the first app: the judge never answers, a failed grading waits a minute
WITHOUT_JUDGE = {"judge": OLD, "judge_max_attempts": 1, "judge_retry_seconds": 60}


async def _submit(client: Any, headers: dict[str, str], count: int) -> list[str]:
    """Submit ``count`` diagnoses; the grading locations."""
    locations = []
    for i in range(count):
        body = {"diagnosis": f"{DIAGNOSIS} ({i})", "ground_truth": TRUTH}
        response = await client.post("/v1/submissions", json=body, headers=headers)
        assert response.status_code == 202, response.text
        locations.append(response.headers["location"])
    return locations


async def _until(client: Any, locations: list[str], headers: dict[str, str], check: Any) -> list:
    """The gradings once ``check`` holds for each (polling for up to ten seconds)."""
    for _ in range(200):
        gradings = [(await client.get(at, headers=headers)).json() for at in locations]
        if all(check(g) for g in gradings):
            return gradings
        await asyncio.sleep(0.05)
    raise AssertionError(f"never reached: {gradings}")


async def _pending_on_old_judge(api_client: ClientFactory, headers: dict[str, str], n: int) -> list:
    """Serve without the judge and submit ``n``: each waits, deferred, bound to it."""
    async with api_client(**WITHOUT_JUDGE) as client:
        locations = await _submit(client, headers, n)
        waiting = await _until(client, locations, headers, lambda g: g["pending_reason"])
    for grading in waiting:
        assert grading["status"] == "pending"
        assert grading["judge"] == {"backend": "ollama", "model": "qwen2.5:7b-instruct"}
        # a code and the kind of failure, never the judge client's own message
        assert grading["pending_reason"] == UNREACHABLE
    return locations


async def _moves(engine: Engine) -> list[dict[str, Any]]:
    """The ``grading.judge_moved`` events of the audit log, oldest first."""
    sql = "SELECT actor, payload FROM audit_log WHERE event = 'grading.judge_moved' ORDER BY seq"
    with engine.connect() as connection:
        rows = (connection.execute(text(sql))).all()
    return [{"actor": a, **(json.loads(p) if isinstance(p, str) else p)} for a, p in rows]


async def _new_judge_calls(engine: Engine) -> dict[str, int]:
    """Judge calls each grading's new judge got, by grading, and gradings per submission."""
    sql = (
        "SELECT g.id, COUNT(c.id) FROM grading g LEFT JOIN judge_call c ON c.grading_id = g.id "
        "AND c.backend = 'scripted' GROUP BY g.id"
    )
    with engine.connect() as connection:
        return {gid: int(n) for gid, n in (connection.execute(text(sql))).all()}


async def test_pending_gradings_follow_a_new_judge_each_graded_once_and_each_move_audited(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    headers, adjudicator = await tokens("submitter"), await tokens("adjudicator")
    locations = await _pending_on_old_judge(api_client, headers, 3)

    new_judge = ScriptedBackend.for_mode("pass")
    async with api_client(judge=NEW, backends={NEW: new_judge}) as client:
        gradings = await _until(client, locations, headers, lambda g: g["status"] != "pending")
        history = (await client.get(f"{locations[0]}/history", headers=adjudicator)).json()
        ready = await client.get("/readyz")

    for grading in gradings:
        assert grading["status"] == "graded" and grading["passed"] is True
        assert grading["judge"] == {"backend": "scripted", "model": "pass"}
    # each graded once by the new judge: one call each (single asking), one grading each
    assert len(new_judge.requests) == 3
    assert sorted((await _new_judge_calls(engine)).values()) == [1, 1, 1]
    moves = await _moves(engine)
    assert sorted(m["grading_id"] for m in moves) == sorted(g["id"] for g in gradings)
    assert {(m["from"], m["to"], m["reason"]) for m in moves} == {
        (OLD, NEW, "configured judge changed")
    }
    events = [e["event"] for e in history["events"]]
    assert events.index("grading.deferred") < events.index("grading.judge_moved")
    assert events.index("grading.judge_moved") < events.index("grading.completed")
    assert ready.status_code == 200 and ready.json()["queue"]["by_judge"] == []
    assert (await verify_chain(engine, key=configured_chain_key())).ok


async def test_pinned_gradings_wait_for_their_judge_until_an_admin_moves_them(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    headers, admin = await tokens("submitter"), await tokens("admin")
    locations = await _pending_on_old_judge(api_client, headers, 2)

    new_judge = ScriptedBackend.for_mode("pass")
    pinned = {"judge": NEW, "backends": {NEW: new_judge}, "pending_judge": "pin"}
    async with api_client(**pinned) as client:
        waiting = await client.get("/readyz")
        for_admin = (await client.get("/readyz", headers=admin)).json()
        still = [(await client.get(at, headers=headers)).json() for at in locations]
        moved = await client.post(
            "/v1/gradings:move-judge", json={"from_judge": OLD}, headers=admin
        )
        gradings = await _until(client, locations, headers, lambda g: g["status"] != "pending")
        ready = await client.get("/readyz")

    assert waiting.status_code == 503
    body = waiting.json()
    assert body["judge"]["ok"] is True  # the configured judge answers; the pinned one not
    assert body["queue"]["by_judge"] == [
        {
            "judge": OLD_NAME,
            "pending": 2,
            "configured": False,
            "ok": False,
            "reason": "judge_unavailable",
        }
    ]
    assert body["reason"].startswith(
        f"2 pending gradings wait for {OLD_NAME}, which is no longer configured and does "
        "not answer (judge_unavailable): move them"
    )
    assert "127.0.0.1:9" not in waiting.text and "cannot reach" not in waiting.text
    assert for_admin["queue"]["by_judge"][0]["spec"] == OLD  # what the admin's move names
    assert {g["status"] for g in still} == {"pending"}
    assert {g["judge"]["backend"] for g in still} == {"ollama"}

    assert moved.status_code == 200, moved.text
    assert moved.json() == {"from_judge": OLD, "to_judge": NEW, "moved": 2}
    assert {(g["status"], g["judge"]["backend"]) for g in gradings} == {("graded", "scripted")}
    assert len(new_judge.requests) == 2
    moves = await _moves(engine)
    assert [(m["from"], m["to"], m["reason"]) for m in moves] == [
        (OLD, NEW, "moved by an admin")
    ] * 2
    assert all(m["actor"] not in ("", "cli") for m in moves)  # the admin token's principal
    assert ready.status_code == 200
    assert (await verify_chain(engine, key=configured_chain_key())).ok


async def test_an_admin_moves_the_gradings_of_a_keyed_judge_by_the_spec_readyz_shows(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    """A judge that takes its key in its base URL's query: ``/readyz`` shows an admin
    the spec pending gradings wait for, the key masked, and a move naming that spec
    moves them; its answer names the judge with the key masked."""
    headers, admin = await tokens("submitter"), await tokens("admin")
    key = "sk-old-4f2a9c1e"
    keyed = f"ollama:qwen2.5:7b-instruct@http://127.0.0.1:9/?api_key={key}"
    shown = "ollama:qwen2.5:7b-instruct@http://127.0.0.1:9/?api_key=***"
    async with api_client(**{**WITHOUT_JUDGE, "judge": keyed}) as client:
        locations = await _submit(client, headers, 2)
        await _until(client, locations, headers, lambda g: g["pending_reason"])
    pinned = {"judge": NEW, "backends": {NEW: ScriptedBackend.for_mode("pass")}}
    async with api_client(**pinned, pending_judge="pin") as client:
        waiting = await client.get("/readyz", headers=admin)
        [entry] = waiting.json()["queue"]["by_judge"]
        moved = await client.post(
            "/v1/gradings:move-judge", json={"from_judge": entry["spec"]}, headers=admin
        )
        gradings = await _until(client, locations, headers, lambda g: g["status"] != "pending")
    assert entry["spec"] == shown and key not in waiting.text
    assert moved.status_code == 200, moved.text
    assert moved.json() == {"from_judge": shown, "to_judge": NEW, "moved": 2}
    assert {g["status"] for g in gradings} == {"graded"}
    assert [(m["from"], m["to"]) for m in await _moves(engine)] == [(shown, NEW)] * 2


async def test_a_bad_move_is_refused_naming_the_field_and_moves_nothing(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    admin = await tokens("admin")
    async with api_client(judge=NEW, start_workers=False) as client:
        refused = {
            "to_judge": await client.post(
                "/v1/gradings:move-judge",
                json={"from_judge": OLD, "to_judge": "nonsense"},
                headers=admin,
            ),
            # follow (the default): pending work goes to the configured judge only
            "follow": await client.post(
                "/v1/gradings:move-judge",
                json={"from_judge": OLD, "to_judge": "scripted:fail"},
                headers=admin,
            ),
            "from_judge": await client.post(
                "/v1/gradings:move-judge", json={"from_judge": NEW}, headers=admin
            ),
            "not a spec": await client.post(
                "/v1/gradings:move-judge", json={"from_judge": "nonsense"}, headers=admin
            ),
        }
    for field, response in refused.items():
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        [error] = response.json()["errors"]
        expected = {"follow": "to_judge", "not a spec": "from_judge"}.get(field, field)
        assert error["field"] == expected
    assert await _moves(engine) == []


class _JudgeDownUntilOpened(ScriptedBackend):
    """Refuses every call with ``down`` until the test sets ``opened``, then answers yes.

    A judge that failed once and answered on the first retry raced the test's polling:
    under load the retry could land before the test saw the grading wait.
    """

    def __init__(self, down: BaseException, *, model: str) -> None:
        super().__init__(model=model)
        self.down = down
        self.opened = False

    def _next(self, request: JudgeRequest) -> str:
        if not self.opened:
            raise self.down
        return scripted_reply(request)


async def test_readyz_is_not_ready_while_gradings_wait_for_an_unreachable_judge_then_ready(
    api_client: ClientFactory, tokens: Any, caplog: pytest.LogCaptureFixture
) -> None:
    headers = await tokens("submitter")
    body_text = "<html>upstream secret-body-7f3a: model not loaded</html>"
    down = JudgeUnavailable(f"openai answered 503: {body_text}", status_code=503)
    spec = "openai:flaky@http://10.1.2.3:8080/v1"
    judge = _JudgeDownUntilOpened(down, model="flaky")
    settings = {"judge_max_attempts": 1, "judge_retry_seconds": 0.5}
    caplog.set_level(logging.INFO, logger="sre_judge.workers")
    async with api_client(judge=spec, backends={spec: judge}, **settings) as client:
        [location] = await _submit(client, headers, 1)
        [waiting] = await _until(client, [location], headers, lambda g: g["pending_reason"])
        not_ready = await client.get("/readyz")
        judge.opened = True  # the judge answers again; the deferred grading is retried
        [graded] = await _until(client, [location], headers, lambda g: g["status"] != "pending")
        ready = await client.get("/readyz")

    assert waiting["pending_reason"] == "judge_unavailable: judge unreachable (HTTP 503)"
    assert not_ready.status_code == 503
    body = not_ready.json()
    assert body["queue"]["by_judge"] == [
        {
            "judge": "openai:flaky",
            "pending": 1,
            "configured": True,
            "ok": False,
            "reason": "judge_unavailable",
        }
    ]
    assert body["reason"] == (
        "1 pending grading waits for openai:flaky, which does not answer (judge_unavailable)"
    )
    # anonymous: neither the judge's internal address nor its error body
    assert "10.1.2.3" not in not_ready.text and "address" not in body["judge"]
    assert "secret-body" not in not_ready.text and "secret-body" not in waiting["pending_reason"]
    assert graded["status"] == "graded"
    assert ready.status_code == 200 and ready.json()["reason"] is None
    # the log line of a deferred grading says what it is: pending, and why
    deferred = next(r for r in caplog.records if r.getMessage() == "grading deferred")
    assert deferred.status == "pending"  # type: ignore[attr-defined]
    assert deferred.pending_reason.startswith("judge_unavailable")  # type: ignore[attr-defined]
    assert not hasattr(deferred, "unscored_reason")


async def test_a_metric_counts_pending_gradings_by_judge(
    api_client: ClientFactory, tokens: Any
) -> None:
    headers = await tokens("submitter")
    async with api_client(judge=OLD, start_workers=False) as client:
        await _submit(client, headers, 2)
        scraped = (await client.get("/metrics")).text
    async with api_client(judge=NEW) as client:  # the workers move and grade them
        for _ in range(200):
            after = (await client.get("/metrics")).text
            if 'sre_judge_pending_gradings{judge="' not in after:
                break
            await asyncio.sleep(0.05)
    assert f'sre_judge_pending_gradings{{judge="{OLD_NAME}"}} 2.0' in scraped
    assert "127.0.0.1:9" not in scraped
    assert 'sre_judge_pending_gradings{judge="' not in after  # none pending, none listed


async def test_a_grading_leased_at_the_restart_moves_when_it_is_claimed(
    api_client: ClientFactory, tokens: Any, engine: Engine, service_key: ServiceKey
) -> None:
    headers = await tokens("submitter")
    async with api_client(judge=OLD, start_workers=False) as client:
        [location] = await _submit(client, headers, 1)
    # a worker of the old process still holds it (it died, or is still asking the old judge)
    store = Store(engine, key=service_key)
    [claim] = await store.queue.claim_pending("old-worker", limit=1, lease_seconds=1)

    new_judge = ScriptedBackend.for_mode("pass")
    # the new process keeps its own default lease: a 1 s lease of its own could expire on a
    # loaded machine between asking the judge and storing, and the judge be asked again
    async with api_client(judge=NEW, backends={NEW: new_judge}) as client:
        [graded] = await _until(client, [location], headers, lambda g: g["status"] != "pending")

    assert graded["status"] == "graded" and graded["judge"]["backend"] == "scripted"
    [move] = await _moves(engine)
    assert move["grading_id"] == claim.grading_id and (move["from"], move["to"]) == (OLD, NEW)
    assert move["actor"] != "old-worker"  # the worker that claimed it after the lease expired
    assert len(new_judge.requests) == 1
    assert (await verify_chain(engine, key=configured_chain_key())).ok
