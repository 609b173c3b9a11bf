"""Fixtures of the API tests: an app on a migrated database with injected judges."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.http.app import create_app
from api.service import grader_factory
from api.service.settings import Settings
from judge.backends import JudgeBackend
from judge.backends.scripted import ScriptedBackend
from judge.retry import RetryPolicy
from storage import Store
from storage.keys import ServiceKey
from tests.support.app_client import AppClient

DEFAULT_SPEC = "scripted:pass"

ClientFactory = Callable[..., Any]


@pytest.fixture
def tokens(engine: Engine, service_key: ServiceKey) -> Callable[..., Any]:
    """Make a token of a role: ``await tokens("submitter")`` -> headers."""
    store = Store(engine, key=service_key)

    async def make(role: str, name: str | None = None) -> dict[str, str]:
        plaintext, _ = await store.tokens.create(name=name or f"{role}-1", role=role)
        return {"Authorization": f"Bearer {plaintext}"}

    return make


@pytest.fixture
def api_client(database_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> ClientFactory:
    """``async with api_client(judge=..., backends=..., **settings) as client``.

    Its graders wait 10-20 ms before retrying a failed judge call, not the service's
    0.5-1 s: the tests count retries, not seconds (a ``Retry-After`` still sets the
    least wait, up to a minute, as in the service)."""
    quick = functools.partial(RetryPolicy, initial_wait=0.01, jitter=0.01)
    monkeypatch.setattr(grader_factory, "RetryPolicy", quick)

    @asynccontextmanager
    async def make(
        *,
        backends: dict[str, JudgeBackend] | None = None,
        start_workers: bool = True,
        **overrides: Any,
    ) -> AsyncIterator[AppClient]:
        values: dict[str, Any] = {
            "database_url": database_url,
            "judge": DEFAULT_SPEC,
            # the service's own poll interval (0.5 s): intake hands work to the workers
            # in process, so only tests of work that arrives otherwise wait for a poll;
            # polling every 0.05 s was about a third of the fast loop's CPU
            "judge_retry_seconds": 60,
            # no random share of (uncalibrated, so provisional) gradings in the review
            # queue unless a test asks for it: grading ids are random
            "provisional_review_rate": 0.0,
            # the scripted judges were never calibrated: under the default pass policy
            # (``qualified``) every pass of theirs would be held. Tests of the grading
            # path state the policy that lets an unflagged pass stand; the default's own
            # tests (test_pass_policy.py) set it back or calibrate the judge
            "pass_policy": "unflagged",
            **overrides,
        }
        settings = Settings(**values)
        injected = backends if backends is not None else {}
        if settings.judge not in injected and settings.judge.startswith("scripted:"):
            injected[settings.judge] = ScriptedBackend.for_mode(settings.judge.split(":", 1)[1])
        app = create_app(settings, engine=engine, backends=injected, start_workers=start_workers)
        async with AppClient(app, timeout=30) as client:
            yield client

    return make
