"""The nine tamper kinds of issue 19, each caught by ``verify_chain`` or a checkpoint.

1. deleting the newest audit row; 2. deleting the newest 52 rows; 3. deleting a row in
the middle; 4. editing a row's payload; 5. rewriting a row and recomputing the chain
after it with plain sha256, or 6. with a key other than the service's; 7. editing a
grading's verdict in the gradings table; 8. editing an answer in the answers table;
9. deleting a grading (or its answers); and, caught by a checkpoint, truncating the log
back past it or replacing the log wholesale (``test_audit_checkpoint.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import delete, func, select, text, update

from storage import Store
from storage.audit import COVERS, ChainKey, state_digest
from storage.keys import ServiceKey
from tests.storage.audit_helpers import (
    ANSWERS,
    AUDIT,
    GRADINGS,
    execute,
    rehash_from,
    rows,
    verify,
    workload,
)
from tests.storage.helpers import submit

pytestmark = pytest.mark.tampers


async def test_the_workload_verifies_with_every_grading_covered(store: Store) -> None:
    ids = await workload(store)
    report = await verify(store)
    assert report.ok, report
    assert report.checked == len(await rows(store.engine)) >= 58
    assert report.gradings_checked == len(ids) and report.gradings_uncovered == 0


async def test_1_deleting_the_newest_row(store: Store) -> None:
    ids = await workload(store)
    newest = (await rows(store.engine))[-1]
    assert newest.event == "grading.overridden"
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq == newest.seq))
    report = await verify(store)
    assert not report.ok and report.first_broken_seq is None
    # the grading it covered, and the override and label it carried
    assert report.state_problems[0] == (
        f"grading {ids[0]} differs from its newest state in the audit log "
        "(its row or answers were edited, or the newest audit rows deleted)"
    )
    override_id = newest.payload["override_id"]
    assert sorted(p.split(" has no state")[0] for p in report.state_problems[1:]) == sorted(
        [
            f"override {override_id}",
            *(f"human_label {k}" for k in newest.payload["rows"]["human_label"]),
        ]
    )


async def test_2_deleting_the_newest_52_rows(store: Store) -> None:
    await workload(store)
    head = (await rows(store.engine))[-1].seq
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq > head - 52))
    report = await verify(store)
    assert not report.ok and report.first_broken_seq is None
    # the gradings completed in those rows, and the one submitted in them
    assert len(report.state_problems) >= 15
    assert any("has no state in the audit log" in p for p in report.state_problems)


async def test_3_deleting_a_row_in_the_middle(store: Store) -> None:
    await workload(store)
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq == 20))
    report = await verify(store)
    assert (report.ok, report.first_broken_seq, report.checked) == (False, 20, 19)
    assert "removed" in (report.reason or "")


async def test_4_editing_a_rows_payload(store: Store) -> None:
    await workload(store)
    row = (await rows(store.engine))[30]
    await execute(
        store.engine,
        update(AUDIT).where(AUDIT.c.seq == row.seq).values(payload={**row.payload, "passed": True}),
    )
    report = await verify(store)
    assert (report.ok, report.first_broken_seq) == (False, row.seq)
    assert "does not match the row's content" in (report.reason or "")


@pytest.mark.parametrize(
    ("start", "broken", "reason"),
    [
        # the whole log: its first row carrying gradings' state is refused unkeyed
        (1, 2, "an unkeyed row carries gradings' state"),
        # from a middle row on: a downgrade after keyed rows
        (30, 30, "an unkeyed row after keyed rows"),
    ],
)
async def test_5_a_rewritten_row_with_the_chain_recomputed_with_plain_sha256(
    store: Store, start: int, broken: int, reason: str
) -> None:
    await workload(store)
    row = (await rows(store.engine))[start - 1]
    await execute(
        store.engine,
        update(AUDIT).where(AUDIT.c.seq == start).values(payload={**row.payload, "x": 1}),
    )
    await rehash_from(store.engine, start, None)
    report = await verify(store)
    assert (report.ok, report.first_broken_seq) == (False, broken)
    assert reason in (report.reason or "")


@pytest.mark.parametrize("same_key_id", [False, True])
async def test_6_a_rewritten_row_with_the_chain_recomputed_with_a_wrong_key(
    store: Store, same_key_id: bool
) -> None:
    await workload(store)
    row = (await rows(store.engine))[29]
    covers = dict.fromkeys(row.payload.get(COVERS, {}), "0" * 32)
    await execute(
        store.engine,
        update(AUDIT).where(AUDIT.c.seq == row.seq).values(payload={**row.payload, COVERS: covers}),
    )
    forged = ChainKey.of(ServiceKey.ephemeral())
    if same_key_id:  # the key id is public: a forger can copy it
        forged = ChainKey(mac_key=forged.mac_key, key_id=store.db.chain_key.key_id)
    await rehash_from(store.engine, row.seq, forged)
    report = await verify(store)
    assert (report.ok, report.first_broken_seq) == (False, row.seq)
    reason = "rehashed without the key" if same_key_id else "not with the configured key"
    assert reason in (report.reason or "")


async def test_7_editing_a_gradings_verdict(store: Store) -> None:
    ids = await workload(store)
    await execute(store.engine, update(GRADINGS).where(GRADINGS.c.id == ids[5]).values(passed=True))
    report = await verify(store)
    assert not report.ok and report.checked == len(await rows(store.engine))
    assert len(report.state_problems) == 1 and ids[5] in report.state_problems[0]
    assert "edited" in report.state_problems[0]


async def test_8_editing_an_answer(store: Store) -> None:
    ids = await workload(store)
    answer = (ANSWERS.c.grading_id == ids[3]) & (ANSWERS.c.question_id == "D1-Q2")
    await execute(store.engine, update(ANSWERS).where(answer).values(answer=True))
    report = await verify(store)
    assert not report.ok and len(report.state_problems) == 1
    assert ids[3] in report.state_problems[0]


async def test_9_deleting_a_grading_or_its_answers(store: Store) -> None:
    ids = await workload(store)
    pending = ids[-1]  # nothing refers to a pending grading: it can be deleted alone
    await execute(
        store.engine,
        delete(GRADINGS).where(GRADINGS.c.id == pending),
        delete(ANSWERS).where(ANSWERS.c.grading_id == ids[7]),
    )
    with store.engine.connect() as connection:
        left = connection.execute(select(func.count()).where(GRADINGS.c.id == pending))
        assert left.scalar_one() == 0
    report = await verify(store)
    assert not report.ok
    assert sorted(report.state_problems) == sorted(
        [
            f"grading {pending} is in the audit log but missing from the gradings table",
            f"grading {ids[7]} differs from its newest state in the audit log "
            "(its row or answers were edited, or the newest audit rows deleted)",
        ]
    )


async def test_lease_bookkeeping_is_not_a_change_of_state(store: Store) -> None:
    """Claims, lease extensions and releases write no audit event and break nothing."""
    outcome = await submit(store)
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    await store.queue.extend_lease(outcome.grading.id, "w", 120)
    await store.queue.release_lease(outcome.grading.id, "w")
    assert (await verify(store)).ok


class _Row:
    """A row as SQLAlchemy returns it: ``_mapping`` and attributes."""

    def __init__(self, **values: Any) -> None:
        self._mapping = values
        self.__dict__.update(values)


def test_the_digest_ignores_nulls_defaults_and_leases_but_not_values() -> None:
    base = {"id": "g1", "status": "graded", "passed": False, "revision": 2}
    answers = [_Row(id=1, grading_id="g1", question_id="D1-Q1", answer=True, reasoning="")]
    digest = state_digest(_Row(**base), answers)
    # a later nullable column, a column at its default, lease bookkeeping: no change
    assert state_digest(_Row(**base, held_at=None), answers) == digest
    assert state_digest(_Row(**base, needs_review=False, review_reasons=[]), answers) == digest
    assert state_digest(_Row(**base, lease_owner="w", claim_count=3), answers) == digest
    # a NULL verdict is not a failing one; an answer's id is not its content
    assert state_digest(_Row(**{**base, "passed": None}), answers) != digest
    assert state_digest(_Row(**base), [_Row(**{**answers[0]._mapping, "id": 9})]) == digest
    assert state_digest(_Row(**base), [_Row(**{**answers[0]._mapping, "answer": False})]) != digest
    assert state_digest(_Row(**base), []) != digest


#: (what, SQL run as the attacker with write access, what the report must name)
UNREADABLE = [
    (
        "audit payload with NaN",
        "UPDATE audit_log SET payload = '{\"x\": NaN}' WHERE seq = 3",
        "3",
    ),
    (
        "audit payload with a lone surrogate escape",
        'UPDATE audit_log SET payload = \'{"x": "\\ud800"}\' WHERE seq = 3',
        "3",
    ),
    (
        "audit created_at not a timestamp",
        "UPDATE audit_log SET created_at = 'yesterday' WHERE seq = 3",
        "3",
    ),
    (
        "grading review_reasons with a lone surrogate escape",
        "UPDATE grading SET review_reasons = '[\"\\ud800\"]' WHERE id = '{grading}'",
        "{grading}",
    ),
    (
        "grading review_reasons with NaN",
        "UPDATE grading SET review_reasons = '[NaN]' WHERE id = '{grading}'",
        "{grading}",
    ),
    (
        "submission metadata with NaN",
        "UPDATE submission SET metadata = '{\"x\": NaN}' "
        "WHERE id = (SELECT submission_id FROM grading WHERE id = '{grading}')",
        "submission",
    ),
]


@pytest.mark.parametrize(("what", "sql", "named"), UNREADABLE, ids=[t[0] for t in UNREADABLE])
async def test_a_value_no_digest_can_hold_is_named_not_raised(
    store: Store, db_backend: str, what: str, sql: str, named: str
) -> None:
    """SQLite keeps JSON as text and a time column holds any text: an attacker writes
    NaN, a lone surrogate escape or 'yesterday', and verify raised (ValueError,
    UnicodeEncodeError) instead of naming the row, the CLI showing a traceback."""
    if db_backend != "sqlite":
        pytest.skip("PostgreSQL refuses these values itself")
    ids = await workload(store)
    grading = ids[0]
    await execute(store.engine, text(sql.replace("{grading}", grading)))
    report = await verify(store)  # raised before: ValueError / UnicodeEncodeError
    assert not report.ok
    found = f"{report.reason} {report.state_problems} {report.first_broken_seq}"
    assert named.replace("{grading}", grading) in found, report
