"""API tokens: the secret is shown once, stored hashed, and checked for revocation and expiry."""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select

from storage import AuditRecord, NotFound, Store, make_engine
from storage.engine import session_factory
from storage.keys import ServiceKey
from tests.conftest import Clock


async def test_a_new_token_authenticates(store: Store) -> None:
    plaintext, record = await store.tokens.create(name="ci", role="submitter")
    assert plaintext.startswith("srej_") and plaintext not in record.token_hash
    found = await store.tokens.authenticate(plaintext)
    assert found is not None and (found.id, found.role) == (record.id, "submitter")


async def test_unknown_tokens_do_not_authenticate(store: Store) -> None:
    await store.tokens.create(name="ci", role="admin")
    assert await store.tokens.authenticate("srej_not-a-token") is None


async def test_revoked_tokens_do_not_authenticate(store: Store) -> None:
    plaintext, record = await store.tokens.create(name="ci", role="adjudicator")
    revoked = await store.tokens.revoke(record.id)
    assert revoked.revoked_at is not None
    assert await store.tokens.authenticate(plaintext) is None
    again = await store.tokens.revoke(record.id)
    assert again.revoked_at == revoked.revoked_at
    with pytest.raises(NotFound):
        await store.tokens.revoke("missing")


async def test_a_request_read_while_the_revocation_commits_is_not_remembered(
    store: Store,
) -> None:
    """A request of the token arrives while its revocation is being written: it still gets
    in (it came first), but once the revocation has returned the token is refused: the
    record that request read is not remembered as valid."""
    plaintext, record = await store.tokens.create(name="ci", role="admin")
    loop = asyncio.get_running_loop()
    audit, seen = store.db.audit, []

    def audit_and_meanwhile_authenticate(session: Any, event: str, **kwargs: Any) -> None:
        audit(session, event, **kwargs)
        if event == "token.revoked":
            pending = asyncio.run_coroutine_threadsafe(store.tokens.authenticate(plaintext), loop)
            seen.append(pending.result(timeout=10))

    store.db.audit = audit_and_meanwhile_authenticate  # type: ignore[method-assign]
    await store.tokens.revoke(record.id, actor="admin")
    assert seen and seen[0] is not None
    assert await store.tokens.authenticate(plaintext) is None


async def test_expired_tokens_do_not_authenticate(store: Store, clock: Clock) -> None:
    plaintext, _ = await store.tokens.create(
        name="short", role="submitter", expires_at=clock() + timedelta(seconds=60)
    )
    assert await store.tokens.authenticate(plaintext) is not None
    clock.advance(61)
    assert await store.tokens.authenticate(plaintext) is None


async def test_unknown_roles_are_refused(store: Store) -> None:
    with pytest.raises(ValueError, match="role"):
        await store.tokens.create(name="x", role="root")


async def test_tokens_are_listed_and_their_creation_is_audited_without_the_secret(
    store: Store,
) -> None:
    plaintext, record = await store.tokens.create(name="ci", role="submitter")
    assert [t.id for t in await store.tokens.all()] == [record.id]
    report_rows = await _audit_payloads(store)
    assert any(p.get("token_id") == record.id for p in report_rows)
    assert all(plaintext not in str(p) and record.token_hash not in str(p) for p in report_rows)


async def _audit_payloads(store: Store) -> list[dict[str, object]]:
    with session_factory(store.engine)() as session:
        return [r.payload for r in (session.execute(select(AuditRecord))).scalars()]


async def test_a_token_revoked_by_another_process_stops_working_within_a_second(
    store: Store, database_url: str, service_key: ServiceKey
) -> None:
    # a second store on its own engine: another process's pool and token cache
    other_engine = make_engine(database_url)
    other = Store(other_engine, key=service_key)
    try:
        plaintext, record = await store.tokens.create(name="ci", role="submitter")
        assert await other.tokens.authenticate(plaintext) is not None  # now remembered there
        await store.tokens.revoke(record.id)
        assert await store.tokens.authenticate(plaintext) is None  # at once where revoked
        revoked_at = time.monotonic()
        while await other.tokens.authenticate(plaintext) is not None:
            assert time.monotonic() - revoked_at < 1.0, "still accepted a second after"
            await asyncio.sleep(0.02)
    finally:
        other_engine.dispose()


async def test_two_revocations_at_once_keep_the_first_time_and_audit_once(
    engine: Any, service_key: ServiceKey
) -> None:
    """Two admins (or the command line and an admin, in two processes) revoke one token
    at the same moment: the first time is kept and the audit log records one
    revocation, by whoever was first."""
    first, second = Store(engine, key=service_key), Store(engine, key=service_key)
    _, token = await first.tokens.create(name="ci-harness", role="submitter")
    inside = threading.Event()

    def slow_commit(session: Any, events: Any, **_: Any) -> None:
        # the first revocation has written its row and its audit event and commits a
        # moment later, while the second one is under way
        if any(event["event"] == "token.revoked" for event in events):
            inside.set()
            time.sleep(1.0)

    first.db.subscribe(slow_commit)
    by_api = asyncio.create_task(first.tokens.revoke(token.id, actor="admin-1"))
    assert await asyncio.to_thread(inside.wait, 10)
    by_cli = await second.tokens.revoke(token.id, actor="cli")
    by_api_record = await by_api
    events = await first.db.run_read(
        lambda session: list(
            session.execute(
                select(AuditRecord.actor).where(AuditRecord.event == "token.revoked")
            ).scalars()
        )
    )
    assert events == ["admin-1"], events
    assert by_cli.revoked_at == by_api_record.revoked_at
    stored = await second.tokens.all()
    assert [t.revoked_at for t in stored] == [by_api_record.revoked_at]
