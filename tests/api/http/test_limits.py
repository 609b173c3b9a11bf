"""Limits: a rate per token (429), a ceiling on the queue (503), a timeout on every judge call."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from api.http.limits import TokenBucket
from tests.api.conftest import ClientFactory
from tests.support.judge_server import running_judge_server, sregym_reply

TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"


async def _count(engine: Engine, table: str) -> int:
    with engine.connect() as connection:
        return int((connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())


def _body(n: int) -> dict[str, Any]:
    return {"diagnosis": f"user-service listens on 9999 (#{n})", "ground_truth": TRUTH}


def test_a_token_bucket_refills_at_its_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(6, clock=lambda: now[0])  # one every 10 s, bursts of 6
    assert [bucket.take("a") for _ in range(6)] == [None] * 6
    assert bucket.take("a") == pytest.approx(10.0)
    assert bucket.take("b") is None  # each key has its own bucket
    now[0] += 5
    assert bucket.take("a") == pytest.approx(5.0)
    now[0] += 5
    assert bucket.take("a") is None


async def test_submissions_over_the_rate_get_429_with_retry_after_and_store_nothing(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    async with api_client(rate_limit_per_minute=2, start_workers=False) as client:
        first, second = await tokens("submitter", "a"), await tokens("submitter", "b")
        assert (
            await client.post("/v1/submissions", json=_body(1), headers=first)
        ).status_code == 202
        assert (
            await client.post("/v1/submissions", json=_body(2), headers=first)
        ).status_code == 202
        refused = await client.post("/v1/submissions", json=_body(3), headers=first)
        other = await client.post("/v1/submissions", json=_body(4), headers=second)
        scrape = await client.get("/metrics")
    assert refused.status_code == 429
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert 1 <= int(refused.headers["retry-after"]) <= 30
    assert refused.json()["status"] == 429
    assert other.status_code == 202  # the limit is per token
    assert await _count(engine, "submission") == 3
    assert 'sre_judge_submissions_rejected_total{reason="rate_limited"} 1.0' in scrape.text


async def test_the_rate_limit_counts_submissions_stored_not_refusals_or_replays(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    """A bucket of that many submissions: a request refused as invalid (422, nothing
    stored) or a replay of a stored one took a token, and the token's next real
    submission was a 429; a client retrying a lost answer was refused its grading."""
    settings = {"rate_limit_per_minute": 2, "max_text_bytes": 1024, "start_workers": False}
    async with api_client(**settings) as client:
        agent = await tokens("submitter")
        keyed = {**agent, "Idempotency-Key": "run-1"}
        too_long = {"diagnosis": "x" * 1025, "ground_truth": TRUTH}
        refused = [await client.post("/v1/submissions", json=too_long, headers=agent)]
        refused.append(await client.post("/v1/submissions", json=too_long, headers=agent))
        stored = await client.post("/v1/submissions", json=_body(1), headers=keyed)
        replays = [await client.post("/v1/submissions", json=_body(1), headers=keyed)]
        second = await client.post("/v1/submissions", json=_body(2), headers=agent)
        # the bucket is empty now: a replay still gets its answer, a new submission not
        replays.append(await client.post("/v1/submissions", json=_body(1), headers=keyed))
        third = await client.post("/v1/submissions", json=_body(3), headers=agent)
    assert [r.status_code for r in refused] == [422, 422]
    assert stored.status_code == second.status_code == 202
    assert [r.status_code for r in replays] == [202, 202]
    assert all(r.headers["idempotent-replayed"] == "true" for r in replays)
    assert third.status_code == 429
    assert await _count(engine, "submission") == 2


async def test_a_full_queue_answers_503_with_retry_after_and_stores_nothing(
    api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    async with api_client(max_pending=2, start_workers=False) as client:
        headers = await tokens("submitter")
        keyed = {**headers, "Idempotency-Key": "run-1"}
        for n in range(2):
            accepted = await client.post(
                "/v1/submissions", json=_body(n), headers=keyed if n == 0 else headers
            )
            assert accepted.status_code == 202
        refused = await client.post("/v1/submissions", json=_body(9), headers=headers)
        # the replay of a stored submission stores nothing: the ceiling lets it through
        replayed = await client.post("/v1/submissions", json=_body(0), headers=keyed)
    assert replayed.status_code == 202, replayed.text
    assert replayed.headers["idempotent-replayed"] == "true"
    assert refused.status_code == 503
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert int(refused.headers["retry-after"]) > 0
    assert "nothing was stored" in refused.json()["detail"]
    assert await _count(engine, "submission") == 2
    assert await _count(engine, "grading") == 2
    assert await _count(engine, "audit_log WHERE event = 'submission.received'") == 2


@pytest.mark.parametrize("backend", ["openai", "ollama"])
async def test_the_judge_timeout_bounds_every_call(
    backend: str, api_client: ClientFactory, tokens: Any, engine: Engine
) -> None:
    reply = sregym_reply({"D1-Q1"}, evidence="9999")
    with running_judge_server(default=reply, delay=10.0) as judge:
        url = judge.openai_url if backend == "openai" else judge.ollama_url
        settings = {"judge_timeout": 0.5, "judge_max_attempts": 1}
        async with api_client(judge=f"{backend}:m@{url}", **settings) as client:
            headers = await tokens("submitter")
            started = time.monotonic()
            response = await client.post("/v1/submissions", json=_body(1), headers=headers)
            assert response.status_code == 202
            for _ in range(160):
                with engine.connect() as connection:
                    reason = (
                        connection.execute(text("SELECT pending_reason FROM grading"))
                    ).scalar_one()
                if reason:
                    break
                await asyncio.sleep(0.05)
            elapsed = time.monotonic() - started
    assert reason is not None and reason.startswith("judge_timeout"), reason
    assert elapsed < 8  # well under the server's 10 s: the call was cut at 0.5 s
