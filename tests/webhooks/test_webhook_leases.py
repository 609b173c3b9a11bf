"""Webhook leases: one send per lease, handed from one send to the next, never shared;
a delivery given up and a redelivery of its endpoint at once both succeed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.webhooks.queries import WebhookQueries
from storage import Store
from storage.errors import Conflict
from tests.conftest import Clock
from tests.support.lock_waits import race_at_audit
from tests.support.statements import statements

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def _endpoint(store: Store, n: int = 0) -> str:
    record = await WebhookQueries(store.db).create_endpoint(
        url=f"http://127.0.0.1:9/hook{n}", events=["regrade.finished"], description="", actor="t"
    )
    return record.id


async def _events(store: Store, count: int) -> None:
    """``count`` regrade.finished events, one transaction each (a delivery per endpoint)."""
    for n in range(count):
        with store.db.sessions()() as session, session.begin():
            store.db.audit(
                session, "regrade_job.done", entity_type="regrade_job", entity_id=f"j{n}",
                actor="t", payload={"state": "done", "counts": {}},
            )  # fmt: skip


def _job(claimed: Any) -> str:
    return str(claimed.payload["data"]["regrade_job_id"])


async def test_a_lease_covers_one_send_and_hands_the_endpoint_to_the_next(
    store: Store, clock: Clock, webhooks: WebhookQueries
) -> None:
    await _endpoint(store)
    await _events(store, 3)
    [first] = await webhooks.claim_due(lease_seconds=13)
    assert _job(first) == "j0" and first.attempts == 1
    assert await webhooks.claim_due(lease_seconds=13) == []  # another process: nothing
    second = await webhooks.record_attempt(
        first, status=200, error=None, duration_ms=2500, retry_at=None, lease_next=13
    )
    assert second is not None and _job(second) == "j1"  # leased in the same transaction
    assert await webhooks.claim_due(lease_seconds=13) == []
    clock.advance(12)
    assert await webhooks.claim_due(lease_seconds=13) == []  # 2.5 s sends: still held
    clock.advance(2)  # the holder died mid-send: its lease runs out, the send is repeated
    [again] = await webhooks.claim_due(lease_seconds=13)
    assert again.id == second.id and again.attempts == 2


async def test_two_stores_claiming_at_once_never_lease_one_delivery_twice(
    store: Store, engine: Engine, database_url: str, clock: Clock, webhooks: WebhookQueries
) -> None:
    """Two processes' stores (their own engines) claim concurrently, round after round."""
    from storage import make_engine

    for n in range(12):
        await _endpoint(store, n)
    await _events(store, 4)  # 48 deliveries, 4 per endpoint
    other_engine = make_engine(database_url)
    other = Store(other_engine, clock=clock, key=store.db.key)
    sent: list[str] = []
    try:
        for _ in range(8):
            rounds = await asyncio.gather(
                *(
                    WebhookQueries(s.db).claim_due(lease_seconds=60)
                    for s in (store, other, store, other)
                )
            )
            claimed = [c for round_ in rounds for c in round_]
            sent.extend(c.id for c in claimed)
            for c in claimed:
                await webhooks.record_attempt(
                    c, status=200, error=None, duration_ms=1, retry_at=None
                )
    finally:
        other_engine.dispose()
    assert len(sent) == 48 and len(set(sent)) == 48


async def test_on_sqlite_an_idle_claim_only_reads_and_never_takes_the_write_lock(
    store: Store, engine: Engine, clock: Clock, webhooks: WebhookQueries
) -> None:
    # every process polls for deliveries; on SQLite a write transaction holds the one
    # write lock, so a poll that finds nothing due must never take it
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL leases with SKIP LOCKED; its writers wait on row locks only")
    await _endpoint(store)

    async def claim(look: bool = True) -> tuple[int, list[str]]:
        """How many it claimed, and how each statement begins (``BEGIN DEFERRED``...)."""
        with statements(engine) as sent:
            claimed = await webhooks.claim_due(lease_seconds=13, look=look)
        words = [statement.split() for statement in sent]
        return len(claimed), [" ".join(w[:2]) if w[0] == "BEGIN" else w[0] for w in words]

    assert await claim() == (0, ["BEGIN DEFERRED", "SELECT"])  # nothing at all
    await _events(store, 1)
    found, kinds = await claim()
    assert found == 1 and "BEGIN IMMEDIATE" in kinds and "UPDATE" in kinds
    # a worker just told of its own process's new deliveries leases without looking
    found, kinds = await claim(look=False)
    assert found == 0 and kinds[0] == "BEGIN IMMEDIATE"
    assert await claim() == (0, ["BEGIN DEFERRED", "SELECT"])  # leased: not due
    clock.advance(14)  # the lease ran out: due again, and claimed
    assert (await claim())[0] == 1


async def test_a_delivery_being_sent_cannot_be_redelivered_until_its_attempt_is_in(
    store: Store, webhooks: WebhookQueries
) -> None:
    """Redelivering made a leased delivery due at once: a second server sent it while
    the first send was in flight, and that send's result then undid the redelivery."""
    endpoint = await _endpoint(store)
    await _events(store, 1)
    [first] = await webhooks.claim_due(lease_seconds=60)
    with pytest.raises(Conflict, match="being sent now"):
        await webhooks.redeliver(endpoint, first.id, actor="admin")
    assert await webhooks.claim_due(lease_seconds=60) == []  # the lease holds
    await webhooks.record_attempt(first, status=200, error=None, duration_ms=1, retry_at=None)
    await webhooks.redeliver(endpoint, first.id, actor="admin")
    [again] = await webhooks.claim_due(lease_seconds=60)
    assert again.id == first.id and again.attempts == 1  # a redelivery is a new series


async def test_redelivering_an_older_delivery_waits_for_the_send_in_flight(
    store: Store, webhooks: WebhookQueries
) -> None:
    """An older delivery redelivered becomes the endpoint's head, but the endpoint still
    gets one send at a time: it goes once the send in flight is recorded."""
    endpoint = await _endpoint(store)
    await _events(store, 2)
    [first] = await webhooks.claim_due(lease_seconds=60)
    second = await webhooks.record_attempt(
        first, status=200, error=None, duration_ms=1, retry_at=None, lease_next=60
    )
    assert second is not None and _job(second) == "j1"
    await webhooks.redeliver(endpoint, first.id, actor="admin")
    assert await webhooks.claim_due(lease_seconds=60) == []  # j1 is being sent
    following = await webhooks.record_attempt(
        second, status=200, error=None, duration_ms=1, retry_at=None, lease_next=60
    )
    assert following is not None and following.id == first.id


async def test_a_sender_whose_lease_ran_out_does_not_take_the_endpoint_from_the_new_holder(
    store: Store, clock: Clock, webhooks: WebhookQueries
) -> None:
    """Server A leases j0 and is frozen past its lease; server B leases j0 again and is
    sending it. A wakes and records its outcome: it must not clear B's lease nor lease
    (and send) j1 while B's send of j0 is in flight ("sends nothing more"; one send at
    a time per endpoint, in event order)."""
    await _endpoint(store)
    await _events(store, 2)
    [held_by_a] = await webhooks.claim_due(lease_seconds=15)
    clock.advance(16)  # A frozen past its lease
    server_b = WebhookQueries(store.db)
    [held_by_b] = await server_b.claim_due(lease_seconds=15)
    assert held_by_b.id == held_by_a.id  # B is sending j0 now
    next_for_a = await webhooks.record_attempt(
        held_by_a, status=200, error=None, duration_ms=16000.0, retry_at=None, lease_next=15
    )
    # while B still sends j0, nobody else may get the endpoint
    also_claimable = await WebhookQueries(store.db).claim_due(lease_seconds=15)
    assert next_for_a is None, _job(next_for_a)
    assert also_claimable == []


async def test_a_delivery_given_up_while_an_admin_redelivers_another_of_its_endpoint(
    store: Store, monkeypatch: pytest.MonkeyPatch, webhooks: WebhookQueries
) -> None:
    """The delivery loop gives a delivery up (the endpoint's failures counted, the
    dead letter audited) as an admin redelivers another delivery of that endpoint (its
    circuit closed, about to audit): one waits for the other and both are stored."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    endpoint = await _endpoint(store)
    await _events(store, 2)
    [first] = await webhooks.claim_due(lease_seconds=60)
    other = next(
        v.delivery.id for v in await webhooks.deliveries(endpoint) if v.delivery.id != first.id
    )
    await race_at_audit(
        store,
        monkeypatch,
        "webhook.redelivered",
        webhooks.redeliver(endpoint, other, actor="admin"),
        lambda: webhooks.record_attempt(
            first, status=500, error="server error", duration_ms=5, retry_at=None
        ),
    )
    states = {v.delivery.id: v.delivery.state for v in await webhooks.deliveries(endpoint)}
    assert states == {first.id: "dead", other: "pending"}


async def test_a_redelivery_is_not_undone_by_a_sender_whose_lease_ran_out(
    store: Store, clock: Clock, webhooks: WebhookQueries
) -> None:
    """A redelivery made after a frozen sender's lease ran out stands: the sender's late
    outcome (here its failed send, the last of its old series) is recorded and changes
    nothing else; the delivery stays pending and is sent again as attempt 1 of the new
    series."""
    endpoint = await _endpoint(store)
    await _events(store, 1)
    [held_by_a] = await webhooks.claim_due(lease_seconds=15)
    clock.advance(16)  # A frozen past its lease
    await webhooks.redeliver(endpoint, held_by_a.id, actor="admin")
    # A wakes: its send failed and, by its (old) series, it gives the delivery up
    await webhooks.record_attempt(
        held_by_a, status=500, error="server error", duration_ms=16000.0, retry_at=None
    )
    [view] = await webhooks.deliveries(endpoint)
    assert view.delivery.state == "pending", (
        f"the admin's redelivery was undone by the stale sender: {view.delivery.state}"
    )
    claimed = await webhooks.claim_due(lease_seconds=15)
    assert [c.id for c in claimed] == [held_by_a.id]
    assert claimed[0].attempts == 1
