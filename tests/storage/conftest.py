"""After every storage test that wrote through the store, the audit log must verify.

This is how the suite finds a write path that changes a grading or its answers without
covering its state in the chain (``Database.audit(..., covers=...)``): its test fails
here. Tests that tamper with the database on purpose carry ``@pytest.mark.tampers``
(registered in ``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from sqlalchemy.engine import Engine

from storage import ChainKey, Store, verify_chain
from storage.keys import ServiceKey
from tests.conftest import Clock


@pytest.fixture
async def store(
    request: pytest.FixtureRequest, engine: Engine, clock: Clock, service_key: ServiceKey
) -> AsyncIterator[Store]:
    """The store of ``tests/conftest.py``; the audit log must verify once the test is done."""
    yield Store(engine, clock=clock, key=service_key)
    if request.node.get_closest_marker("tampers"):
        return
    report = await verify_chain(engine, key=ChainKey.of(service_key))
    assert report.ok, f"the audit log does not verify after this test: {report}"
