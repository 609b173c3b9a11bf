"""Fixtures of the webhook tests: the API client and tokens of ``tests/api``, a store with
the outbox subscribed (as the app wiring does) whose audit log must verify after each
test (as in ``tests/storage``), and the feature's queries over it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.engine import Engine

from api.webhooks.outbox import subscribe as subscribe_outbox
from api.webhooks.queries import WebhookQueries
from storage import ChainKey, Store, verify_chain
from storage.keys import ServiceKey
from tests.api.conftest import api_client, tokens
from tests.conftest import Clock

__all__ = ["api_client", "store", "tokens", "webhooks"]


@pytest.fixture
async def store(engine: Engine, clock: Clock, service_key: ServiceKey) -> AsyncIterator[Store]:
    """A store whose audited events write the webhooks' outbox; the audit log must verify
    once the test is done."""
    store = Store(engine, clock=clock, key=service_key)
    subscribe_outbox(store.db)
    yield store
    report = await verify_chain(engine, key=ChainKey.of(service_key))
    assert report.ok, f"the audit log does not verify after this test: {report}"


@pytest.fixture
def webhooks(store: Store) -> WebhookQueries:
    """The webhooks' queries over the test's store."""
    return WebhookQueries(store.db)
