"""Logs written before keyed hashes: their rows are checked as legacy, stay pinned, and
fail ``verify`` until a keyed backfill adopts them (so a wholesale rewrite into the
unkeyed form fails too)."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, update

from storage import Store, verify_chain
from storage.audit import COVERS, ROWS
from storage.audit.backfill import backfill
from tests.storage.audit_helpers import AUDIT, execute, rehash_from, rows, verify
from tests.storage.helpers import graded_result, submit

pytestmark = pytest.mark.tampers

LEGACY = 3  # the rubric version, the submission, the token


async def legacy_log(store: Store) -> str:
    """A log as an earlier version wrote it: plain sha256, no state digests.

    Returns the id of the grading it holds (which carries no digest).
    """
    outcome = await submit(store)
    await store.tokens.create(name="old", role="submitter")
    found = await rows(store.engine)
    assert len(found) == LEGACY
    await execute(
        store.engine,
        *(
            update(AUDIT)
            .where(AUDIT.c.seq == row.seq)
            .values(payload={k: v for k, v in row.payload.items() if k not in (COVERS, ROWS)})
            for row in found
        ),
    )
    await rehash_from(store.engine, 1, None)
    return outcome.grading.id


async def test_legacy_rows_fail_until_a_keyed_backfill_adopts_them(store: Store) -> None:
    old = await legacy_log(store)
    outcome = await submit(store)
    await store.queue.claim_pending("w", limit=2, lease_seconds=60)
    await store.queue.complete(old, "w", graded_result())  # now covered
    await store.queue.complete(outcome.grading.id, "w", graded_result())
    found = await rows(store.engine)
    assert found[LEGACY].prev_hash == found[LEGACY - 1].hash  # the first keyed row links on
    report = await verify(store)
    assert not report.ok and report.first_broken_seq is None
    assert report.legacy_rows == LEGACY and report.checked == len(found)
    assert report.records_uncovered == 1  # the old submission
    assert any(f"{LEGACY} legacy rows (unkeyed)" in p for p in report.state_problems)
    done = await backfill(store.db)
    assert (done.legacy_rows, done.gradings, done.records, done.events) == (LEGACY, 0, 1, 1)
    report = await verify(store)
    assert report.ok, report
    assert report.legacy_adopted and (report.gradings_checked, report.gradings_uncovered) == (2, 0)
    assert (report.records_checked, report.records_uncovered) == (4, 0)  # submissions, calls
    assert await backfill(store.db) == type(done)(LEGACY, 0, 0, 0)  # nothing left to adopt


async def test_a_grading_written_before_keys_is_uncovered_until_backfilled(store: Store) -> None:
    await legacy_log(store)
    await submit(store)
    report = await verify(store)
    assert not report.ok and (report.gradings_checked, report.gradings_uncovered) == (1, 1)
    assert any("1 gradings and 1 records" in p and "backfill" in p for p in report.state_problems)
    await backfill(store.db)
    report = await verify(store)
    assert report.ok and (report.gradings_checked, report.gradings_uncovered) == (2, 0)


async def test_a_log_of_legacy_rows_alone_fails(store: Store) -> None:
    """A log rewritten wholesale into the unkeyed form, digests stripped, is refused."""
    await legacy_log(store)
    for key in (None, store.db.chain_key):
        report = await verify_chain(store.engine, key=key)
        assert not report.ok and report.first_broken_seq is None
        assert report.legacy_rows == LEGACY and not report.legacy_adopted
        assert "no keyed backfill adopting them" in report.state_problems[0]


async def test_a_backfill_does_not_adopt_rows_whose_audit_rows_were_deleted(
    store: Store,
) -> None:
    """Rows written after coverage began stay a problem: adopting them would launder."""
    await submit(store)
    await store.tokens.create(name="later", role="submitter")
    head = (await rows(store.engine))[-1].seq
    await submit(store)
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq > head))
    done = await backfill(store.db)
    assert (done.gradings, done.records, done.events) == (0, 0, 0)
    report = await verify(store)
    assert not report.ok and len(report.state_problems) == 2
    assert all("has no state in the audit log" in p for p in report.state_problems)


async def test_editing_a_legacy_row_breaks_the_link_to_the_first_keyed_row(store: Store) -> None:
    await legacy_log(store)
    await submit(store)
    row = (await rows(store.engine))[1]
    await execute(
        store.engine,
        update(AUDIT).where(AUDIT.c.seq == 2).values(payload={**row.payload, "agent": "x"}),
    )
    report = await verify(store)
    assert (report.ok, report.first_broken_seq) == (False, 2)
    # recomputing the legacy rows' sha256 moves the break to the first keyed row
    await rehash_from(store.engine, 2, None, until=LEGACY)
    found = await rows(store.engine)
    await execute(
        store.engine,
        update(AUDIT).where(AUDIT.c.seq == LEGACY + 1).values(prev_hash=found[LEGACY - 1].hash),
    )
    report = await verify(store)
    assert (report.ok, report.first_broken_seq) == (False, LEGACY + 1)
    assert "does not match the row's content" in (report.reason or "")


async def test_a_keyed_log_needs_the_key(store: Store) -> None:
    await submit(store)
    report = await verify_chain(store.engine, key=None)
    assert (report.ok, report.first_broken_seq) == (False, 1)
    assert "no key was given" in (report.reason or "")
