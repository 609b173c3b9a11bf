"""What ``/readyz`` and ``/metrics`` say while the database fails: a not-ready 503 naming
the database, never a 500; no queue figure shown as read when it was not."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import Engine

from tests.api.conftest import ClientFactory
from tests.support.outage import database_down, queue_queries_fail
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the scrape-time figures read from the database
QUEUE = ("sre_judge_queue_pending", "sre_judge_queue_oldest_pending_age_seconds")


async def test_readyz_with_an_admin_token_names_the_database_while_it_is_down(
    api_client: ClientFactory, engine: Engine, tokens: Any
) -> None:
    """The admin's token is read from the database: its failure was a 500."""
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        with database_down(engine):
            response = await client.get("/readyz", headers=admin)
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["database"]["ok"] is False and "database does not answer" in body["reason"]


async def test_readyz_is_not_ready_when_the_queue_cannot_be_read(
    api_client: ClientFactory, engine: Engine
) -> None:
    """``SELECT 1`` answers but the queue's query fails (a lock timeout, an I/O error):
    not ready, saying the database, where it was a 500."""
    async with api_client(start_workers=False) as client:
        with queue_queries_fail(engine):
            response = await client.get("/readyz")
            probed = await client.head("/readyz")  # what an uptime checker sends
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["status"] == "not ready" and body["database"]["ok"] is False
    assert body["queue"]["pending"] is None
    assert probed.status_code == 503 and probed.content == b""


def _figures(text: str) -> dict[str, float]:
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name in (*QUEUE, "sre_judge_database_up")
    }


async def test_queue_gauges_are_not_shown_as_read_while_the_database_is_down(
    api_client: ClientFactory, engine: Engine, tokens: Any
) -> None:
    """The gauges kept the last figures read: a queue depth nothing measured passed as
    current and the oldest age stopped growing, so an alert on it could not fire in the
    very outage that stops the queue. Now NaN, and ``sre_judge_database_up`` 0."""
    headers = await tokens("submitter")
    async with api_client(start_workers=False) as client:
        for n in range(2):
            sent = {"diagnosis": f"d{n}", "ground_truth": TRUTH}
            assert (await client.post("/v1/submissions", json=sent, headers=headers)).is_success
        before = _figures((await client.get("/metrics")).text)
        with database_down(engine):
            await asyncio.sleep(0.1)
            during = await client.get("/metrics")
        after = _figures((await client.get("/metrics")).text)
    assert before["sre_judge_queue_pending"] == 2 and before["sre_judge_database_up"] == 1
    assert during.status_code == 200  # a scrape still answers
    figures = _figures(during.text)
    assert figures["sre_judge_database_up"] == 0
    assert all(math.isnan(figures[name]) for name in QUEUE), figures
    assert after["sre_judge_queue_pending"] == 2 and after["sre_judge_database_up"] == 1


@pytest.mark.parametrize("route", ["submit", "read"])
async def test_a_database_outage_answers_503_with_retry_after_not_500(
    api_client: Any, tokens: Any, engine: Engine, route: str
) -> None:
    """A database outage passes: the API answers 503 with ``Retry-After`` (as ``/readyz``
    says not ready), so a client retries (a submission with its ``Idempotency-Key``)
    instead of giving up on a 500."""
    submitter = await tokens("submitter")
    body = {"diagnosis": DIAGNOSIS, "ground_truth": TRUTH}
    async with api_client(start_workers=False) as client:
        made = await client.post("/v1/submissions", json=body, headers=submitter)
        assert made.status_code == 202, made.text
        with database_down(engine):
            if route == "submit":
                answer = await client.post(
                    "/v1/submissions",
                    json=body,
                    headers={**submitter, "Idempotency-Key": "run-1"},
                )
            else:
                answer = await client.get(made.headers["location"], headers=submitter)
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert answer.status_code == 503, answer.text
    assert answer.headers.get("retry-after", "").isdigit(), dict(answer.headers)
