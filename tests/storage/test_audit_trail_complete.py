"""The audit trail is complete: each state change is an event, and it says who made it
(the command line, a token, a background loop)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from api.service.settings import Settings
from api.webhooks.delivery import WebhookDelivery
from api.webhooks.outbox import subscribe as subscribe_outbox
from api.webhooks.queries import WebhookQueries
from storage import ChainKey, Store, verify_chain
from storage.tables import AuditRecord
from tests.conftest import Clock
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key
from tests.support.webhook_receiver import receiving


def _rows(engine: Engine) -> list[Any]:
    with engine.connect() as connection:
        query = select(AuditRecord).order_by(AuditRecord.seq)  # type: ignore[arg-type]
        return list(connection.execute(query))


async def test_cli_tokens_create_is_audited_with_the_cli_as_actor(
    engine: Engine, database_url: str
) -> None:
    """``sre-judge tokens create`` is an operator's action at the command line: its
    ``token.created`` event says so (actor ``cli``), as every other command's does."""
    env = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url}
    created = cli_in_process("tokens", "create", "--role", "admin", "--name", "ops", env=env)
    assert created.returncode == 0, created.stderr
    token_id = _rows(engine)[-1].entity_id
    revoked = cli_in_process("tokens", "revoke", token_id, env=env)
    assert revoked.returncode == 0, revoked.stderr
    actors = {row.event: row.actor for row in _rows(engine) if row.entity_id == token_id}
    assert actors["token.revoked"] == "cli"  # the revocation says who did it
    assert actors["token.created"] == "cli", actors
    report = await verify_chain(engine, key=ChainKey.of(session_key()))
    assert report.ok, report


async def test_cli_import_is_audited_with_the_cli_as_actor(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """``sre-judge import jsonl`` run on the database is an operator's action at the
    command line: each ``submission.imported`` says so (actor ``cli``), naming no job."""
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps({"diagnosis": "pod OOMKilled", "ground_truth": "g"}) + "\n")
    env = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url}
    imported = cli_in_process("import", "jsonl", str(history), env=env)
    assert imported.returncode == 0, imported.stderr
    events = [(r.actor, r.payload) for r in _rows(engine) if r.event == "submission.imported"]
    assert [actor for actor, _ in events] == ["cli"]
    assert all("import_job_id" not in payload for _, payload in events)
    report = await verify_chain(engine, key=ChainKey.of(session_key()))
    assert report.ok, report


async def test_a_dead_lettered_webhook_delivery_is_an_audit_event(
    engine: Engine, database_url: str, clock: Clock
) -> None:
    """A delivery given up on (dead-lettered) is a state change: an event subscribers were
    promised is lost unless an admin redelivers it. It is audited as the redelivery is
    (``webhook.dead_lettered``, by the delivery loop)."""
    store = Store(engine, clock=clock, key=session_key())
    subscribe_outbox(store.db)
    webhooks = WebhookQueries(store.db)
    settings = Settings(
        database_url=database_url,
        webhook_allow_hosts="127.0.0.1",
        webhook_retry_seconds=1,
        webhook_give_up_seconds=2,
    )
    with receiving() as receiver:
        receiver.status = lambda n: 500
        endpoint = await webhooks.create_endpoint(
            url=receiver.url, events=["regrade.finished"], description="", actor="t"
        )
        with store.db.sessions()() as session, session.begin():
            store.db.audit(
                session, "regrade_job.done", entity_type="regrade_job", entity_id="j1",
                actor="t", payload={"state": "done", "counts": {}},
            )  # fmt: skip
        delivery = WebhookDelivery(store, settings)
        for _ in range(4):
            await delivery.deliver_due()
            clock.advance(1.5)
    [view] = await webhooks.deliveries(endpoint.id)
    assert view.delivery.state == "dead"  # the precondition: it was dead-lettered
    mentions = [
        (row.event, row.actor)
        for row in _rows(engine)
        if row.event.startswith("webhook.") and view.delivery.id in str(row.payload)
    ]
    assert mentions == [("webhook.dead_lettered", "webhooks")], mentions
    report = await verify_chain(engine, key=ChainKey.of(session_key()))
    assert report.ok, report
