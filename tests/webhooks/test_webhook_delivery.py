"""The webhook delivery worker: its lanes, retries and each endpoint's circuit breaker,
over all its deliveries."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import update
from sqlmodel import col

from api.service.settings import Settings
from api.webhooks import target
from api.webhooks.delivery import WebhookDelivery, retry_at
from api.webhooks.queries import Claimed, WebhookQueries
from storage import Store
from storage.webhooks.tables import WebhookEndpointRecord
from tests.conftest import Clock
from tests.support.webhook_receiver import receiving

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def _deliveries(store: Store, endpoint_id: str) -> dict[str, Any]:
    views = await WebhookQueries(store.db).deliveries(endpoint_id)
    return {v.delivery.payload["data"]["regrade_job_id"]: v for v in views}


def _finished(store: Store, job: str) -> None:
    """A ``regrade_job.done`` event of ``job``: a delivery to every subscriber."""
    with store.db.sessions()() as session, session.begin():
        store.db.audit(
            session, "regrade_job.done", entity_type="regrade_job", entity_id=job,
            actor="t", payload={"state": "done", "counts": {}},
        )  # fmt: skip


async def _two_finished_regrade_jobs(store: Store) -> None:
    """Two ``regrade_job.done`` events, j1 then j2: two deliveries to every subscriber."""
    for job in ("j1", "j2"):
        _finished(store, job)


async def test_failures_in_a_row_open_the_circuit_for_every_delivery_of_the_endpoint(
    store: Store, clock: Clock, database_url: str, webhooks: WebhookQueries
) -> None:
    """Two failures in a row open it: once the first delivery is dead-lettered, the next
    one waits for the circuit, not for its own (first) attempt; a 2xx closes it."""
    settings = Settings(
        database_url=database_url,
        webhook_allow_hosts="127.0.0.1",
        webhook_retry_seconds=1,
        webhook_circuit_failures=2,
        webhook_give_up_seconds=2.5,
    )
    with receiving() as receiver:
        receiver.status = lambda n: 500
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        await _two_finished_regrade_jobs(store)
        delivery = WebhookDelivery(store, settings)
        assert await delivery.deliver_due() == 1 and receiver.requests == 1  # j1 fails
        assert await delivery.deliver_due() == 0  # j1 in backoff, j2 behind it
        clock.advance(1.1)
        await delivery.deliver_due()  # j1's second failure in a row opens the circuit
        [state] = [e for e in await webhooks.endpoints() if e.id == endpoint.id]
        assert state.consecutive_failures == 2 and state.circuit_open_until is not None
        clock.advance(2.1)
        await delivery.deliver_due()  # j1 fails once more, too old: dead; open for 2 s
        assert (await _deliveries(store, endpoint.id))["j1"].delivery.state == "dead"
        assert receiver.requests == 3
        clock.advance(1.0)  # j2 has been due all along, but the circuit is open
        assert await delivery.deliver_due() == 0 and receiver.requests == 3
        receiver.status = lambda n: 200
        clock.advance(1.1)
        assert await delivery.deliver_due() == 1  # the probe: delivered, circuit closed
        j2 = (await _deliveries(store, endpoint.id))["j2"]
        assert j2.delivery.state == "delivered" and len(j2.attempts) == 1
        [state] = [e for e in await webhooks.endpoints() if e.id == endpoint.id]
        assert state.consecutive_failures == 0 and state.circuit_open_until is None


@pytest.mark.tampers
async def test_an_endpoint_failing_for_weeks_has_each_failure_recorded_and_rests_an_hour_at_most(
    store: Store, clock: Clock, database_url: str, webhooks: WebhookQueries
) -> None:
    """An endpoint whose receiver has been down for weeks has failed a thousand attempts
    in a row (about 24 a day once its circuit rests an hour between probes). Its next
    failed probe is recorded like any other, and its circuit rests at most an hour."""
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1", webhook_retry_seconds=5,
    )  # fmt: skip
    with receiving() as receiver:
        receiver.status = lambda n: 503
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        # ~45 days of hourly probes, set here instead of failing a thousand times
        with store.db.sessions()() as session, session.begin():
            session.execute(
                update(WebhookEndpointRecord)
                .where(col(WebhookEndpointRecord.id) == endpoint.id)
                .values(consecutive_failures=1100)
            )
        _finished(store, "j1")
        await WebhookDelivery(store, settings).deliver_due()
        assert receiver.requests == 1
        [view] = await webhooks.deliveries(endpoint.id)
        assert [a.status for a in view.attempts] == [503]
        assert view.delivery.leased_until is None
        [state] = [e for e in await webhooks.endpoints() if e.id == endpoint.id]
        assert state.consecutive_failures == 1101
        assert state.circuit_open_until is not None
        assert state.circuit_open_until <= clock() + timedelta(hours=1, seconds=5)


def test_a_delivery_retried_for_weeks_waits_an_hour_at_most(clock: Clock) -> None:
    """With a give-up time of months, a delivery that has failed a thousand times is
    still retried within the hour."""
    settings = Settings(webhook_retry_seconds=5, webhook_give_up_seconds=90 * 86400)
    now = clock()
    claimed = Claimed(
        seq=1, id="d", endpoint_id="e", url="https://example.com/", secret="s", payload={},
        attempts=1100, first_attempt_at=now - timedelta(days=45), endpoint_failures=0,
    )  # fmt: skip
    again = retry_at(claimed, now, settings)
    assert again is not None and again <= now + timedelta(hours=1)


async def test_a_delivery_queued_behind_a_failing_one_is_retried_from_its_first_attempt(
    store: Store, clock: Clock, database_url: str, webhooks: WebhookQueries
) -> None:
    """The give-up time counts from a delivery's first attempt: j2, which waited (in
    event order) behind j1 for longer than SRE_JUDGE_WEBHOOK_GIVE_UP_SECONDS while the
    receiver was down, is retried after its first failure, not dead-lettered; and it is
    still listed with the time of its event."""
    settings = Settings(
        database_url=database_url,
        webhook_allow_hosts="127.0.0.1",
        webhook_retry_seconds=1,
        webhook_circuit_failures=100,  # keep the circuit breaker out of the way
        webhook_give_up_seconds=2.5,
    )
    with receiving() as receiver:
        receiver.status = lambda n: 500
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        await _two_finished_regrade_jobs(store)
        created = (await _deliveries(store, endpoint.id))["j2"].delivery.created_at
        delivery = WebhookDelivery(store, settings)
        await delivery.deliver_due()  # j1 fails
        clock.advance(1.1)
        await delivery.deliver_due()  # j1 fails again
        clock.advance(2.1)
        await delivery.deliver_due()  # j1 fails, has failed for 3.2 s > 2.5 s: dead
        views = await _deliveries(store, endpoint.id)
        assert views["j1"].delivery.state == "dead"
        assert views["j2"].delivery.attempts == 0
        await delivery.deliver_due()  # j2's first attempt fails
        j2 = (await _deliveries(store, endpoint.id))["j2"]
        assert len(j2.attempts) == 1
        assert j2.delivery.state == "pending", j2.delivery.state
        clock.advance(2.1)  # j2 has failed for 2.1 s: retried again
        await delivery.deliver_due()
        j2 = (await _deliveries(store, endpoint.id))["j2"]
        assert len(j2.attempts) == 2 and j2.delivery.state == "pending"
        assert j2.delivery.created_at == created


async def test_a_stop_lets_the_send_in_flight_finish_and_starts_no_other(
    store: Store, database_url: str, webhooks: WebhookQueries
) -> None:
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1", poll_seconds=0.05
    )
    with receiving() as receiver:
        receiver.delay = lambda n: 0.5
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        await _two_finished_regrade_jobs(store)
        delivery = WebhookDelivery(store, settings)
        delivery.start()
        for _ in range(500):  # the receiver is a thread: poll it
            if receiver.requests:
                break
            await asyncio.sleep(0.01)
        await delivery.stop()  # j1's receiver is still holding its request
        assert receiver.requests == 1
        deliveries = await _deliveries(store, endpoint.id)
        assert deliveries["j1"].delivery.state == "delivered"  # finished and recorded
        assert deliveries["j2"].delivery.attempts == 0  # not started, not leased
        [due] = await webhooks.claim_due(lease_seconds=13)
        assert due.id == deliveries["j2"].delivery.id


async def test_a_stop_while_a_send_is_recorded_gives_the_next_delivery_back_unsent(
    store: Store, database_url: str, webhooks: WebhookQueries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that comes while a send's outcome is being recorded (a busy database makes
    the record wait its turn) starts no further send: the endpoint's next delivery, leased
    with that record, is given back unsent, its attempt not counted, and due at once."""
    record = WebhookQueries.record_attempt
    recording = asyncio.Event()

    async def slow_record(self: WebhookQueries, *args: Any, **kwargs: Any) -> Any:
        recording.set()
        await asyncio.sleep(0.4)  # the writer's turn comes a moment later
        return await record(self, *args, **kwargs)

    monkeypatch.setattr(WebhookQueries, "record_attempt", slow_record)
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1", poll_seconds=0.05
    )
    with receiving() as receiver:
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        await _two_finished_regrade_jobs(store)
        delivery = WebhookDelivery(store, settings)
        delivery.start()
        await asyncio.wait_for(recording.wait(), timeout=10)  # j1 sent, being recorded
        assert receiver.requests == 1
        await delivery.stop()
        assert receiver.requests == 1, "the stopping server sent j2 after the stop"
        deliveries = await _deliveries(store, endpoint.id)
    assert deliveries["j1"].delivery.state == "delivered"
    j2 = deliveries["j2"].delivery
    assert (j2.state, j2.attempts, j2.leased_until, j2.first_attempt_at) == (
        "pending",
        0,
        None,
        None,
    )
    [due] = await webhooks.claim_due(lease_seconds=13)
    assert due.id == j2.id and due.attempts == 1


async def test_an_event_committed_while_its_endpoints_lane_winds_down_is_sent_at_once(
    store: Store, database_url: str, webhooks: WebhookQueries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event is sent as soon as it has committed, also when it commits just as its
    endpoint's lane, having found nothing more to send, closes its connections (made slow
    here, as a TLS close over a slow link may be): not at the next idle poll."""
    close = target.PinnedTransport.aclose

    async def slow_close(self: target.PinnedTransport) -> None:
        await asyncio.sleep(0.3)
        await close(self)

    monkeypatch.setattr(target.PinnedTransport, "aclose", slow_close)
    settings = Settings(database_url=database_url, webhook_allow_hosts="127.0.0.1", poll_seconds=30)
    with receiving() as receiver:
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        delivery = WebhookDelivery(store, settings)
        delivery.start()
        try:
            await asyncio.sleep(0.1)  # the dispatcher's first (empty) look is done
            _finished(store, "j1")
            for _ in range(500):
                if (await _deliveries(store, endpoint.id))["j1"].delivery.state == "delivered":
                    break
                await asyncio.sleep(0.01)
            _finished(store, "j2")  # while j1's lane closes its client
            for _ in range(100):  # 5 s: well within the 30 s poll
                if receiver.requests >= 2:
                    break
                await asyncio.sleep(0.05)
            assert receiver.requests == 2, "j2 waits for the next idle poll"
        finally:
            await delivery.stop()


#: a control character in the path: urlsplit and getaddrinfo take it, httpx refuses it
_UNSENDABLE_URL = "http://127.0.0.1:9/ho\x7fok"


async def test_a_send_that_raises_outside_httpx_errors_is_recorded_as_a_failed_attempt(
    store: Store, clock: Clock, database_url: str, webhooks: WebhookQueries
) -> None:
    """Every send ends in a recorded attempt, and in a dead letter at last, whatever it
    raised (httpx.InvalidURL is no httpx.HTTPError): never a delivery leased again and
    again without an attempt, holding up the endpoint's later events."""
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1",
        webhook_retry_seconds=1, webhook_give_up_seconds=5,
    )  # fmt: skip
    endpoint = await webhooks.create_endpoint(
        url=_UNSENDABLE_URL, events=["regrade.finished"], description="", actor="t"
    )
    _finished(store, "j1")
    delivery = WebhookDelivery(store, settings)
    for _ in range(4):
        await delivery.deliver_due()
        clock.advance(30)  # past any lease and backoff, past giving up
    [view] = await webhooks.deliveries(endpoint.id)
    assert view.attempts, (view.delivery.state, view.delivery.attempts, "no attempt recorded")
    assert view.delivery.state == "dead"


async def test_a_redelivered_dead_letter_backs_off_from_the_start_again(
    store: Store, clock: Clock, database_url: str, webhooks: WebhookQueries
) -> None:
    """A redelivery is a new series: a redelivered dead letter that fails once waits
    about SRE_JUDGE_WEBHOOK_RETRY_SECONDS again, not the longest delay of its old series
    (up to an hour after a long outage), and is not given up at once; it is still listed
    with the time of its event."""
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1",
        webhook_retry_seconds=1, webhook_give_up_seconds=200, webhook_circuit_failures=1000,
    )  # fmt: skip
    with receiving() as receiver:
        receiver.status = lambda n: 500
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        _finished(store, "j1")
        delivery = WebhookDelivery(store, settings)
        for _ in range(30):
            await delivery.deliver_due()
            [view] = await webhooks.deliveries(endpoint.id)
            if view.delivery.state == "dead":
                break
            clock.advance(130)
        assert view.delivery.state == "dead" and len(view.attempts) >= 3
        created = view.delivery.created_at
        await webhooks.redeliver(endpoint.id, view.delivery.id, actor="t")
        await delivery.deliver_due()  # fails once more
        [view] = await webhooks.deliveries(endpoint.id)
        assert view.delivery.state == "pending"
        assert view.delivery.created_at == created
        assert view.delivery.next_attempt_at is not None
        wait = view.delivery.next_attempt_at - clock()
        assert wait <= timedelta(seconds=settings.webhook_retry_seconds * 2), wait


@pytest.mark.parametrize("form", ["seconds", "http-date"])
async def test_a_receiver_asking_to_retry_after_a_while_is_not_sent_to_before(
    store: Store, clock: Clock, database_url: str, webhooks: WebhookQueries, form: str
) -> None:
    """A 429 or 503 with ``Retry-After`` (seconds or an HTTP date) holds the retry until
    then, longer than the backoff would; an hour at most."""
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1",
        webhook_retry_seconds=1, webhook_circuit_failures=1000,
    )  # fmt: skip

    def retry_after(n: int) -> dict[str, str]:
        if form == "seconds":
            return {"Retry-After": "120" if n == 0 else "999999"}
        when = clock() + timedelta(seconds=120 if n == 0 else 999999)
        return {"Retry-After": when.strftime("%a, %d %b %Y %H:%M:%S GMT")}

    with receiving() as receiver:
        receiver.status = lambda n: 429 if n < 2 else 200
        receiver.headers = retry_after
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        _finished(store, "j1")
        delivery = WebhookDelivery(store, settings)
        await delivery.deliver_due()
        clock.advance(60)  # past the 1 s backoff, within the 120 s asked for
        assert await delivery.deliver_due() == 0 and receiver.requests == 1
        clock.advance(61)
        await delivery.deliver_due()
        assert receiver.requests == 2  # asked again for ~11 days: an hour at most
        clock.advance(3599)
        assert await delivery.deliver_due() == 0 and receiver.requests == 2
        clock.advance(2)
        await delivery.deliver_due()
        [view] = await webhooks.deliveries(endpoint.id)
        assert view.delivery.state == "delivered" and receiver.requests == 3


async def test_an_inactive_endpoint_gets_none_of_its_pending_deliveries(
    store: Store, database_url: str, webhooks: WebhookQueries
) -> None:
    """An endpoint switched off (``active`` false, set by hand) is sent nothing more, not
    even the deliveries already pending for it when it was switched off."""
    settings = Settings(database_url=database_url, webhook_allow_hosts="127.0.0.1")
    with receiving() as receiver:
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        _finished(store, "j1")  # a pending delivery, written while the endpoint was active
        with store.db.sessions()() as session, session.begin():  # the endpoint turned off
            session.execute(
                update(WebhookEndpointRecord)
                .where(col(WebhookEndpointRecord.id) == endpoint.id)
                .values(active=False)
            )
        [listed] = [e for e in await webhooks.endpoints() if e.id == endpoint.id]
        assert listed.active is False
        await WebhookDelivery(store, settings).deliver_due()
        assert receiver.requests == 0, "an inactive endpoint was sent a delivery"


async def test_a_stop_while_the_dispatcher_leases_gives_the_delivery_back_unsent(
    store: Store, database_url: str, webhooks: WebhookQueries, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop that comes while the dispatcher's lease commits gives that delivery back
    unsent: due at once for whoever runs next, its attempt not counted."""
    lease = WebhookQueries._lease
    leasing = threading.Event()

    def slow_lease(self: WebhookQueries, *args: Any, **kwargs: Any) -> Any:
        leasing.set()
        time.sleep(0.4)  # a busy database: the lease commits a moment later
        return lease(self, *args, **kwargs)

    monkeypatch.setattr(WebhookQueries, "_lease", slow_lease)
    settings = Settings(
        database_url=database_url, webhook_allow_hosts="127.0.0.1", poll_seconds=0.05
    )
    with receiving() as receiver:
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        _finished(store, "j1")
        delivery = WebhookDelivery(store, settings)
        delivery.start()
        for _ in range(500):
            if leasing.is_set():
                break
            await asyncio.sleep(0.01)
        assert leasing.is_set()
        await delivery.stop()  # the lease commits while the stop waits for the dispatcher
        assert receiver.requests == 0
        monkeypatch.setattr(WebhookQueries, "_lease", lease)
        [view] = await webhooks.deliveries(endpoint.id)
    j1 = view.delivery
    assert (j1.state, j1.attempts, j1.leased_until, j1.first_attempt_at) == (
        "pending",
        0,
        None,
        None,
    )
    [due] = await webhooks.claim_due(lease_seconds=13)  # due at once for whoever runs next
    assert due.id == j1.id and due.attempts == 1
