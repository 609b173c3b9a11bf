"""Logs written before keyed hashes: their rows verify as legacy, and stay pinned."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from storage import Store, verify_chain
from storage.audit import COVERS
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
            .values(payload={k: v for k, v in row.payload.items() if k != COVERS})
            for row in found
        ),
    )
    await rehash_from(store.engine, 1, None)
    return outcome.grading.id


async def test_legacy_rows_then_keyed_rows_verify_and_are_counted(store: Store) -> None:
    old = await legacy_log(store)
    outcome = await submit(store)
    await store.queue.claim_pending("w", limit=2, lease_seconds=60)
    await store.queue.complete(old, "w", graded_result())  # now covered
    await store.queue.complete(outcome.grading.id, "w", graded_result())
    found = await rows(store.engine)
    assert found[LEGACY].prev_hash == found[LEGACY - 1].hash  # the first keyed row links on
    report = await verify(store)
    assert report.ok, report
    assert report.legacy_rows == LEGACY and report.checked == len(found)
    assert (report.gradings_checked, report.gradings_uncovered) == (2, 0)


async def test_a_grading_written_before_keys_is_counted_not_covered(store: Store) -> None:
    await legacy_log(store)
    await submit(store)
    report = await verify(store)
    assert report.ok and (report.gradings_checked, report.gradings_uncovered) == (1, 1)


async def test_a_legacy_log_verifies_without_a_key(store: Store) -> None:
    await legacy_log(store)
    report = await verify_chain(store.engine, key=None)
    assert report.ok and report.legacy_rows == LEGACY


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
