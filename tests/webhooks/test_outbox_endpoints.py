"""The outbox keeps the active endpoints per engine while the audit chain proves them
current: a quiet service reads them once, and an endpoint registered anywhere else (another
process, another engine) or a change that rolled back makes the next event read them again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from api.webhooks.outbox import subscribe as subscribe_outbox
from api.webhooks.queries import WebhookQueries
from storage import ChainKey, Store, verify_chain
from storage.engine import make_engine
from storage.keys import ServiceKey
from storage.webhooks.tables import WebhookEndpointRecord
from tests.support.statements import statements

#: the engine matters here (how each reads the chain's head): PostgreSQL too under --db all
pytestmark = pytest.mark.postgres


@pytest.fixture
def elsewhere(database_url: str, engine: Engine) -> Iterator[Engine]:
    """A second engine on the test's database: another process, as far as the chain and
    the kept endpoint list can tell."""
    other = make_engine(database_url)
    try:
        yield other
    finally:
        other.dispose()


def _store(engine: Engine, key: ServiceKey) -> Store:
    store = Store(engine, key=key)
    subscribe_outbox(store.db)  # as the app wiring does
    return store


def _finish(store: Store, job: str) -> list[str]:
    """Audit ``regrade_job.done`` of ``job`` in a transaction of its own; the statements
    that reached the webhook endpoints' table."""
    with statements(store.db.engine) as seen, store.db.sessions()() as session, session.begin():
        store.db.audit(
            session, "regrade_job.done", entity_type="regrade_job", entity_id=job,
            actor="t", payload={"state": "done", "counts": {}},
        )  # fmt: skip
    return [s for s in seen if "FROM webhook_endpoint" in s]


async def _announced(store: Store, endpoint_id: str) -> list[str]:
    views = await WebhookQueries(store.db).deliveries(endpoint_id)
    return sorted(v.delivery.payload["data"]["regrade_job_id"] for v in views)


async def _register(store: Store) -> str:
    endpoint = await WebhookQueries(store.db).create_endpoint(
        url="http://127.0.0.1:9/hook", events=["regrade.finished"], description="", actor="t"
    )
    return endpoint.id


async def test_a_quiet_service_reads_its_endpoints_once_and_again_after_registering_one(
    engine: Engine, service_key: ServiceKey
) -> None:
    store = _store(engine, service_key)
    first = await _register(store)
    assert len(_finish(store, "j1")) == 1  # read once
    assert _finish(store, "j2") == [] and _finish(store, "j3") == []  # then kept
    second = await _register(store)  # a webhook.* event: what is kept is void
    assert len(_finish(store, "j4")) == 1
    assert _finish(store, "j5") == []
    assert await _announced(store, first) == ["j1", "j2", "j3", "j4", "j5"]
    assert await _announced(store, second) == ["j4", "j5"]
    assert (await verify_chain(engine, key=ChainKey.of(service_key))).ok


async def test_an_endpoint_registered_by_another_process_gets_the_next_event(
    engine: Engine, elsewhere: Engine, service_key: ServiceKey
) -> None:
    here, there = _store(engine, service_key), _store(elsewhere, service_key)
    _finish(here, "j1")  # no endpoint yet: none kept
    watching = await _register(here)
    _finish(here, "j2")
    assert _finish(here, "j3") == []  # the list is kept: nobody else appended
    registered = await _register(there)  # another writer appends to the chain
    assert len(_finish(here, "j4")) == 1  # so the next event reads the list again
    assert await _announced(here, registered) == ["j4"]
    assert await _announced(here, watching) == ["j2", "j3", "j4"]
    # any other writer's append voids it, not only a registration
    _finish(there, "j5")
    assert len(_finish(here, "j6")) == 1
    assert await _announced(here, registered) == ["j4", "j5", "j6"]
    assert (await verify_chain(engine, key=ChainKey.of(service_key))).ok


async def test_an_endpoint_of_a_rolled_back_change_never_gets_an_event(
    engine: Engine, service_key: ServiceKey
) -> None:
    """An endpoint registered and announced to in a transaction that then rolls back was
    read by that transaction: the next event must not trust that list."""
    store = _store(engine, service_key)
    kept = await _register(store)
    _finish(store, "j1")
    queries = WebhookQueries(store.db)

    def register_and_announce_then_fail() -> None:
        """A registration and an event, as create_endpoint and _finish write them."""
        with store.db.sessions()() as session, session.begin():
            phantom = WebhookEndpointRecord(
                url="http://127.0.0.1:9/gone", events=["regrade.finished"], secret="whsec_x",
                created_by="t",
            )  # fmt: skip
            session.add(phantom)
            session.flush()
            store.db.audit(
                session, "webhook.created", entity_type="webhook", entity_id=phantom.id,
                actor="t", payload={},
            )  # fmt: skip
            store.db.audit(
                session, "regrade_job.done", entity_type="regrade_job", entity_id="lost",
                actor="t", payload={"state": "done", "counts": {}},
            )  # fmt: skip
            raise RuntimeError("the change fails after its events were written")

    with pytest.raises(RuntimeError):
        register_and_announce_then_fail()
    assert len(_finish(store, "j2")) == 1  # the rolled-back transaction's list is not trusted
    assert [e.id for e in await queries.endpoints()] == [kept]
    assert await _announced(store, kept) == ["j1", "j2"]
    assert (await verify_chain(engine, key=ChainKey.of(service_key))).ok
