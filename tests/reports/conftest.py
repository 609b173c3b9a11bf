"""Fixtures of the report and export tests: the API client and tokens of ``tests/api``,
and a store whose audit log must verify after each test (as in ``tests/storage``)."""

from __future__ import annotations

from tests.api.conftest import api_client, tokens
from tests.storage.conftest import store

__all__ = ["api_client", "store", "tokens"]
