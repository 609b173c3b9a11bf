"""Fixtures of the webhook tests: the API client and tokens of ``tests/api``, the store of
``tests/storage`` (the audit log must verify after each test), and the feature's queries."""

from __future__ import annotations

import pytest

from api.webhooks.queries import WebhookQueries
from storage import Store
from tests.api.conftest import api_client, tokens
from tests.storage.conftest import store

__all__ = ["api_client", "store", "tokens", "webhooks"]


@pytest.fixture
def webhooks(store: Store) -> WebhookQueries:
    """The webhooks' queries over the test's store."""
    return WebhookQueries(store.db)
