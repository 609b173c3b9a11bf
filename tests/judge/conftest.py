"""Fixtures of the judge tests: the OpenAI-compatible server as respx stands it in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import respx

from judge.backends.openai import OpenAIBackend
from tests.judge.backend_servers import OPENAI_BASE, OPENAI_MODEL


@pytest.fixture
def openai_api() -> Iterator[respx.MockRouter]:
    """A respx router at the OpenAI base URL; every route it is given must be called."""
    with respx.mock(base_url=OPENAI_BASE, assert_all_called=True) as router:
        yield router


@pytest.fixture
async def openai_backend() -> AsyncIterator[OpenAIBackend]:
    """An OpenAI backend at the stood-in server, closed after the test."""
    judge = OpenAIBackend(OPENAI_MODEL, base_url=OPENAI_BASE, api_key="sk-test")
    yield judge
    await judge.aclose()
