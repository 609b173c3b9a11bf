"""Verdicts stored in batches: one statement per table, leases checked, the chain intact."""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.engine import Engine

from storage import AnswerRecord, FinishedGrading, JudgeCallRecord, Store, verify_chain
from storage.engine import session_factory
from tests.conftest import Clock
from tests.storage.helpers import graded_result, submit, unscored_result
from tests.support.statements import statements


async def _claimed(store: Store, count: int, worker: str = "w1") -> list[str]:
    ids = [(await submit(store)).grading.id for _ in range(count)]
    claims = await store.queue.claim_pending(worker, limit=count, lease_seconds=30)
    assert {c.grading_id for c in claims} == set(ids)
    return ids


async def _audit(engine: Engine) -> list[tuple[str, str]]:
    sql = "SELECT event, entity_id FROM audit_log WHERE actor = 'w1' ORDER BY seq"
    with engine.connect() as connection:
        return [tuple(row) for row in connection.execute(text(sql))]  # type: ignore[misc]


async def test_a_batch_costs_the_same_statements_whatever_its_size(
    store: Store, engine: Engine
) -> None:
    counts = []
    for size in (2, 30):
        ids = await _claimed(store, size)
        # nine calls each, as per-question asking makes
        items = [FinishedGrading(i, "w1", graded_result(calls=9)) for i in ids]
        with statements(engine) as seen:
            assert await store.queue.complete_many(items) == [True] * size
        counts.append(len(seen))
    assert counts[0] == counts[1], counts
    with session_factory(engine)() as session:
        calls = (session.execute(select(func.count()).select_from(JudgeCallRecord))).one()
        answers = (session.execute(select(func.count()).select_from(AnswerRecord))).one()
    assert (calls[0], answers[0]) == (32 * 9, 32 * 9)


async def test_the_audit_rows_of_a_batch_chain_in_its_order_and_verify(
    store: Store, engine: Engine
) -> None:
    ids = await _claimed(store, 12)
    results = [graded_result(calls=3) if n % 3 else unscored_result() for n in range(12)]
    items = [FinishedGrading(i, "w1", r) for i, r in zip(ids, results, strict=True)]

    assert await store.queue.complete_many(items) == [True] * 12

    expected = []
    for grading_id, result in zip(ids, results, strict=True):
        expected += [("judge.call", grading_id)] * len(result.calls)
        completed = "grading.completed" if result.status == "graded" else "grading.unscored"
        expected.append((completed, grading_id))
    assert await _audit(engine) == expected
    report = await verify_chain(engine, key=store.db.chain_key)
    assert report.ok, report
    for grading_id, result in zip(ids, results, strict=True):
        view = await store.gradings.get(grading_id)
        assert view is not None
        assert (view.grading.status, view.grading.revision) == (result.status, 2)
        assert view.grading.lease_owner is None
        calls = await store.gradings.judge_calls(grading_id)
        assert [c.position for c in calls] == list(range(len(result.calls)))


async def test_a_lease_lost_in_mid_batch_leaves_that_grading_alone(
    store: Store, engine: Engine, clock: Clock
) -> None:
    ids = [(await submit(store)).grading.id for _ in range(5)]
    for limit, lease in ((2, 60), (1, 10), (2, 60)):  # the middle one with a short lease
        await store.queue.claim_pending("w1", limit=limit, lease_seconds=lease)
    clock.advance(11)  # its lease expired: w2 takes it over
    [claim] = await store.queue.claim_pending("w2", limit=5, lease_seconds=30)
    taken = claim.grading_id
    assert taken == ids[2]
    items = [FinishedGrading(i, "w1", graded_result()) for i in ids]
    items.append(FinishedGrading(ids[0], "w1", graded_result()))  # a second verdict of one

    assert await store.queue.complete_many(items) == [True, True, False, True, True, False]

    middle = await store.gradings.get(taken)
    assert middle is not None and middle.grading.status == "pending" and middle.answers == ()
    assert await store.gradings.judge_calls(taken) == []
    assert taken not in {entity for _, entity in await _audit(engine)}
    assert len(await _audit(engine)) == 4 * 2  # one call and the verdict, each stored once
    assert await store.queue.complete(taken, "w2", graded_result())  # its holder still can
    report = await verify_chain(engine, key=store.db.chain_key)
    assert report.ok, report
