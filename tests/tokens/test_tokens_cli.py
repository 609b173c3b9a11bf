"""``sre-judge tokens`` as an operator runs it."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.engine import Engine

from storage import Store, head_revision
from storage.keys import ServiceKey
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key
from tests.support.schema_revisions import at_revision


async def test_create_list_revoke(database_url: str, engine: Engine) -> None:
    env = {"SRE_JUDGE_DATABASE_URL": database_url}
    created = cli_in_process("tokens", "create", "--role", "adjudicator", "--name", "Ada", env=env)
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    assert token.startswith("srej_") and created.stdout.count("\n") == 1
    store = Store(engine, key=session_key())
    record = await store.tokens.authenticate(token)
    assert record is not None and record.name == "Ada" and record.role == "adjudicator"
    listing = cli_in_process("tokens", "list", env=env)
    assert listing.returncode == 0
    assert record.id in listing.stdout and "Ada" in listing.stdout
    assert token not in listing.stdout
    revoked = cli_in_process("tokens", "revoke", record.id, env=env)
    assert revoked.returncode == 0
    # a fresh store, as a server reads it: this one remembers the valid token for
    # TOKEN_CACHE_SECONDS, and a revocation by another store reaches it only after that
    assert await Store(engine, key=session_key()).tokens.authenticate(token) is None
    missing = cli_in_process("tokens", "revoke", "nope", env=env)
    assert missing.returncode == 2 and "no token" in missing.stderr
    bad_role = cli_in_process("tokens", "create", "--role", "god", "--name", "x", env=env)
    assert bad_role.returncode == 2
    too_long = cli_in_process(
        "tokens", "create", "--role", "submitter", "--name", "x" * 129, env=env
    )
    assert too_long.returncode == 2 and "--name" in too_long.stderr
    forever = cli_in_process(
        "tokens", "create", "--role", "submitter", "--name", "x", "--expires-in-days",
        "3000000", env=env,
    )  # fmt: skip
    assert forever.returncode == 2 and "--expires-in-days" in forever.stderr
    args = ("--role", "submitter", "--name", "conductor", "--inline-ground-truth")
    granted = cli_in_process("tokens", "create", *args, env=env)
    record = await store.tokens.authenticate(granted.stdout.strip())
    assert record is not None and record.inline_ground_truth is True
    assert "inline-ground-truth" in cli_in_process("tokens", "list", env=env).stdout


async def test_revoke_refuses_a_database_a_newer_release_migrated(
    database_url: str, engine: Engine, service_key: ServiceKey
) -> None:
    """An older release left behind in an upgrade writes no revocation (nor its audit
    event) to a schema it does not know: ``revoke`` refuses as ``create`` does, naming
    both revisions."""
    store = Store(engine, key=service_key)
    _, record = await store.tokens.create(name="agent", role="submitter")
    with engine.connect() as connection:
        events_before = connection.execute(text("SELECT COUNT(*) FROM audit_log")).scalar_one()
    env = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_AUDIT_CHECKPOINT": "off"}

    with at_revision(engine, "0099"):
        created = cli_in_process("tokens", "create", "--role", "admin", "--name", "x", env=env)
        revoked = cli_in_process("tokens", "revoke", record.id, env=env)

    assert created.returncode != 0 and "0099" in created.stderr
    with engine.connect() as connection:
        revoked_at = connection.execute(
            text("SELECT revoked_at FROM api_token WHERE id = :id"), {"id": record.id}
        ).scalar_one()
        events_after = connection.execute(text("SELECT COUNT(*) FROM audit_log")).scalar_one()
    assert revoked.returncode != 0, revoked.stderr
    assert "0099" in revoked.stderr and str(head_revision()) in revoked.stderr
    assert revoked_at is None
    assert events_after == events_before
