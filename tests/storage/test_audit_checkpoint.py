"""Signed checkpoints pin the chain head: truncation past one and a replaced log are caught."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from sqlalchemy import delete

from storage import Checkpoint, CheckpointError, Store, check_checkpoint, make_checkpoint
from storage.keys import ServiceKey
from tests.storage.audit_helpers import AUDIT, execute, rehash_from, rows, verify, workload
from tests.storage.helpers import graded_result, submit

pytestmark = pytest.mark.tampers


async def checkpoint(store: Store, previous: Checkpoint | None = None) -> Checkpoint:
    """A checkpoint of the store's log, now."""
    return await make_checkpoint(store.engine, store.db.key, at=store.db.clock(), previous=previous)


async def test_a_checkpoint_of_the_head_holds_and_survives_a_round_trip(store: Store) -> None:
    await workload(store)
    head = (await rows(store.engine))[-1]
    made = await checkpoint(store)
    assert (made.seq, made.head_hash, made.rows) == (head.seq, head.hash, head.seq)
    assert made.key_id == store.db.key.key_id and made.signature.startswith("hmac-sha256:")
    assert Checkpoint.from_json(made.to_json()) == made
    with pytest.raises(CheckpointError, match="nested too deeply"):
        Checkpoint.from_json("[" * 100_000 + "]" * 100_000)
    assert await check_checkpoint(store.engine, store.db.key, made) is None
    # the log grows: the old checkpoint still holds, and the next one extends it
    await submit(store)
    assert await check_checkpoint(store.engine, store.db.key, made) is None
    later = await checkpoint(store, made)
    assert later.seq == made.seq + 1


async def test_an_empty_log_has_a_checkpoint_of_row_0(store: Store) -> None:
    made = await checkpoint(store)
    assert (made.seq, made.rows) == (0, 0)
    assert await check_checkpoint(store.engine, store.db.key, made) is None


async def test_truncating_the_log_back_past_a_checkpoint(store: Store) -> None:
    """Tamper kind 10 of the table in docs/audit.md (with 2: the newest rows deleted)."""
    await workload(store)
    made = await checkpoint(store)
    await submit(store)  # rows after the checkpoint
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq >= made.seq - 3))
    problem = await check_checkpoint(store.engine, store.db.key, made)
    assert problem is not None and "deleted back past the checkpoint" in problem


async def test_replacing_the_log_wholesale(store: Store, service_key: ServiceKey) -> None:
    """A log rebuilt from genesis (rows deleted, others written) has other hashes."""
    await workload(store)
    made = await checkpoint(store)
    await execute(store.engine, delete(AUDIT))
    for _ in range(made.seq):  # as many rows again, each chained and keyed correctly
        await store.tokens.create(name="t", role="submitter")
    problem = await check_checkpoint(store.engine, store.db.key, made)
    assert problem is not None and "another hash" in problem


async def test_a_rewritten_history_under_a_checkpoint(store: Store) -> None:
    await workload(store)
    made = await checkpoint(store)
    await rehash_from(store.engine, 10, None)
    problem = await check_checkpoint(store.engine, store.db.key, made)
    assert problem is not None and "rewritten or replaced" in problem


async def test_a_forged_or_altered_checkpoint_is_refused(store: Store) -> None:
    await workload(store)
    made = await checkpoint(store)
    altered = replace(made, seq=made.seq - 5)
    problem = await check_checkpoint(store.engine, store.db.key, altered)
    assert problem is not None and "signature does not match" in problem
    other = ServiceKey.ephemeral()
    problem = await check_checkpoint(store.engine, other, made)
    assert problem is not None and "not with the configured key" in problem


async def test_no_checkpoint_is_signed_over_a_broken_log(store: Store) -> None:
    await workload(store)
    made = await checkpoint(store)
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq == 5))
    with pytest.raises(CheckpointError, match="previous checkpoint does not hold"):
        await checkpoint(store, made)
    with pytest.raises(CheckpointError, match="broken at row 5"):
        await checkpoint(store)


async def test_rows_covering_no_grading_deleted_after_the_last_checkpoint_go_unseen(
    store: Store,
) -> None:
    """The limit docs/audit.md states: nothing pins rows newer than the last checkpoint
    except the gradings' state they cover; a token event covers none."""
    outcome = await submit(store)
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    await store.queue.complete(outcome.grading.id, "w", graded_result())
    made = await checkpoint(store)
    await store.tokens.create(name="ci", role="submitter")
    head = (await rows(store.engine))[-1].seq
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq == head))
    assert (await verify(store)).ok
    assert await check_checkpoint(store.engine, store.db.key, made) is None


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[]",
        '{"seq": 1}',
        '{"key_id": "k", "seq": "1", "head_hash": "h", "rows": 1, "time": "t", "signature": "s"}',
    ],
)
def test_a_line_that_is_not_a_checkpoint_is_refused(line: str) -> None:
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        Checkpoint.from_json(line)


_GOOD = {
    "head_hash": "h",
    "key_id": "k",
    "log": "sre-judge audit log",
    "rows": 1,
    "seq": 1,
    "signature": "hmac-sha256:00",
    "time": "2026-01-01T00:00:00.000000+00:00",
}


@pytest.mark.parametrize(
    ("field", "value", "fault"),
    [
        ("signature", 5, "signature must be text, not a number"),
        ("time", float("nan"), "time must be text, not a number"),
        ("key_id", None, "key_id must be text, not null"),
        ("head_hash", ["h"], "head_hash must be text, not an array"),
        ("log", {}, "log must be text, not an object"),
        ("signature", "hmac-sha256:\u00e9", "signature must be ASCII text"),
        ("seq", True, "seq must be an integer, not a boolean"),
        ("rows", 1.5, "rows must be an integer, not a number"),
    ],
)
def test_a_line_with_a_field_of_the_wrong_type_is_refused_naming_it(
    field: str, value: object, fault: str
) -> None:
    """Each field has its JSON type (``seq`` and ``rows`` integers, the rest ASCII text):
    a garbled line is refused by name when read, never an error later when it is
    checked, signed over or compared with another."""
    line = json.dumps({**_GOOD, field: value})
    with pytest.raises(CheckpointError, match=f"^not a checkpoint: {fault}$"):
        Checkpoint.from_json(line)
    assert Checkpoint.from_json(json.dumps(_GOOD)).signature == _GOOD["signature"]
