"""The service key at start-up and at every append: no process ever writes an audit row
with another key than the one the chain is keyed with."""

from __future__ import annotations

import secrets

import pytest
from sqlalchemy.engine import Engine

from api.service.runtime import Runtime
from api.service.settings import Settings
from storage import ChainKey, verify_chain
from storage.keys import ServiceKey

pytestmark = pytest.mark.slow  # two runtimes with their loops


def _env(database_url: str, **extra: str) -> dict[str, str]:
    return {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE": "scripted:pass", **extra}


async def test_two_processes_with_different_keys_starting_together_never_both_append(
    database_url: str, engine: Engine
) -> None:
    """Two processes with different keys start together on a freshly migrated database:
    both pass the start-up check (no keyed row yet), but the second's first append finds
    the head keyed with the first's key and writes nothing (KeyMismatch): the chain
    stays whole."""
    key_a, key_b = secrets.token_hex(32), secrets.token_hex(32)
    first = Runtime(
        Settings(judge="scripted:pass", database_url=database_url, secret_key=key_a, workers=1)
    )
    second = Runtime(
        Settings(judge="scripted:pass", database_url=database_url, secret_key=key_b, workers=1)
    )
    refused: BaseException | None = None
    async with first:  # seeds the rubric versions and failure tags: keyed rows with key A
        try:
            async with second:  # a token created by the second process, keyed with key B
                await second.store.tokens.create(name="race", role="admin")
        except Exception as exc:  # the expected outcome: the second process refuses
            refused = exc
    report = await verify_chain(engine, key=ChainKey.of(ServiceKey(key_a.encode())))
    assert refused is not None and "keyed with key" in str(refused), refused
    assert report.ok, (
        f"a second key's rows entered the chain (refused={refused!r}): "
        f"broken at row {report.first_broken_seq}: {report.reason}"
    )
