"""The work queue: leases, takeovers, verdicts written once, deferrals."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from storage import (
    AnswerRecord,
    AuditRecord,
    FinishedGrading,
    JudgeCallRecord,
    Store,
    verify_chain,
)
from storage.canonical import utcnow
from storage.claims import claimable_query
from storage.engine import session_factory
from storage.queue import LEASE_EXPIRED
from storage.regrade.lifecycle import not_held_back
from tests.conftest import Clock
from tests.storage.helpers import graded_result, judge_call, submit, unscored_result
from tests.support.statements import statements


async def _count(engine: Engine, model: type, **where: str) -> int:
    query = select(func.count()).select_from(model)
    for name, value in where.items():
        query = query.where(getattr(model, name) == value)
    with session_factory(engine)() as session:
        return (session.execute(query)).scalar_one()


async def test_concurrent_claimers_never_share_a_grading(store: Store) -> None:
    expected = {(await submit(store)).grading.id for _ in range(50)}
    claimed: dict[str, list[str]] = {}

    async def claim_loop(worker: str) -> None:
        while True:
            claims = await store.queue.claim_pending(worker, limit=3, lease_seconds=300)
            if not claims:
                return
            for claim in claims:
                claimed.setdefault(claim.grading_id, []).append(worker)

    await asyncio.gather(*(claim_loop(f"w{i}") for i in range(4)))
    assert set(claimed) == expected
    assert all(len(workers) == 1 for workers in claimed.values())


async def test_a_claim_carries_what_the_worker_needs(store: Store) -> None:
    outcome = await submit(store)
    [claim] = await store.queue.claim_pending("w1", limit=10, lease_seconds=60)
    assert claim.grading_id == outcome.grading.id
    assert claim.submission_id == outcome.submission.id
    assert claim.diagnosis == outcome.submission.diagnosis
    assert claim.ground_truth == outcome.submission.ground_truth
    assert (claim.rubric_id, claim.rubric_version) == (
        outcome.grading.rubric_id,
        outcome.grading.rubric_version,
    )
    assert claim.judge_spec == outcome.grading.judge_spec
    assert claim.claim_count == 1
    assert await store.queue.claim_pending("w2", limit=10, lease_seconds=60) == []


async def test_claims_come_oldest_first(store: Store, clock: Clock) -> None:
    ids = []
    for _ in range(3):
        ids.append((await submit(store)).grading.id)
        clock.advance(1)
    claims = await store.queue.claim_pending("w1", limit=2, lease_seconds=60)
    assert [c.grading_id for c in claims] == ids[:2]


async def test_an_expired_lease_is_claimed_again(store: Store, clock: Clock) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("dead", limit=1, lease_seconds=30)
    clock.advance(10)
    assert await store.queue.claim_pending("w2", limit=1, lease_seconds=30) == []
    clock.advance(31)
    [claim] = await store.queue.claim_pending("w2", limit=1, lease_seconds=30)
    assert claim.grading_id == grading_id
    assert claim.claim_count == 2


async def test_a_claim_counts_and_audits_the_workers_a_grading_lost(
    store: Store, engine: Engine, clock: Clock
) -> None:
    """A claim that takes over a lease run out in its worker's hands (killed before it
    stored anything) audits the loss and says how many workers the grading has lost; a
    lease given back (shutdown) or a deferral (the judge away) is no loss."""
    grading_id = (await submit(store)).grading.id
    lost = []
    for n in range(3):
        await store.queue.claim_pending(f"dead-{n}", limit=1, lease_seconds=30)
        clock.advance(31)
        [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=30)
        lost.append(claim.lost_workers)
        assert await store.queue.release_lease(grading_id, "w")  # a graceful shutdown
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=30)
    lost.append(claim.lost_workers)
    retry_at = clock() + timedelta(seconds=1)
    deferred = await store.queue.defer(
        grading_id,
        "w",
        reason="judge unreachable",
        retry_at=retry_at,
        claim_count=claim.claim_count,
    )
    assert deferred
    clock.advance(2)
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=30)
    lost.append(claim.lost_workers)
    assert lost == [1, 2, 3, 0, 0]
    history = [h for h in await store.gradings.history(grading_id) if h.event == LEASE_EXPIRED]
    assert [(h.actor, h.payload["worker"], h.payload["lost_workers"]) for h in history] == [
        ("w", f"dead-{n}", n + 1) for n in range(3)
    ]
    report = await verify_chain(engine, key=store.db.chain_key)
    assert report.ok, report


async def test_extend_lease_only_for_the_holder(store: Store, clock: Clock) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=30)
    assert await store.queue.extend_lease(grading_id, "w1", 120)
    assert not await store.queue.extend_lease(grading_id, "w2", 120)
    clock.advance(60)
    assert await store.queue.claim_pending("w2", limit=1, lease_seconds=30) == []


async def test_a_worker_whose_lease_was_taken_over_writes_nothing(
    store: Store, engine: Engine, clock: Clock
) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("slow", limit=1, lease_seconds=30)
    clock.advance(31)
    await store.queue.claim_pending("fast", limit=1, lease_seconds=30)
    audit_rows = await _count(engine, AuditRecord)

    assert not await store.queue.complete(grading_id, "slow", graded_result())
    view = await store.gradings.get(grading_id)
    assert view is not None
    assert view.grading.status == "pending" and view.grading.lease_owner == "fast"
    assert view.answers == ()
    assert await _count(engine, JudgeCallRecord) == 0
    assert await _count(engine, AuditRecord) == audit_rows

    assert await store.queue.complete(grading_id, "fast", graded_result())
    # a second verdict for the same grading is refused, whoever sends it
    assert not await store.queue.complete(grading_id, "fast", graded_result())
    assert await _count(engine, AnswerRecord, grading_id=grading_id) == 9


async def test_complete_grading_writes_answers_calls_and_audit(
    store: Store, engine: Engine
) -> None:
    outcome = await submit(store)
    grading_id = outcome.grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    result = graded_result(yes=["D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D3-Q1", "D3-Q2"])
    assert await store.queue.complete(grading_id, "w1", result)

    view = await store.gradings.get(grading_id)
    assert view is not None
    g = view.grading
    assert (g.status, g.yes_count, g.passed, g.judge_passed) == ("graded", 7, True, True)
    assert g.composite == result.outcome.composite  # type: ignore[union-attr]
    assert g.decisive is True and g.needs_review is False and g.review_reasons == []
    assert g.lease_owner is None and g.lease_expires_at is None
    assert g.revision == 2 and g.graded_at is not None
    assert [a.question_id for a in view.answers] == [a.question_id for a in result.answers]
    assert [a.answer for a in view.answers] == [a.answer for a in result.answers]
    assert view.answers[0].evidence == "checkout" and view.answers[0].confidence == 0.9

    [call] = await store.gradings.judge_calls(grading_id)
    assert call.messages[1] == {
        "role": "user",
        "content": "<diagnosis>the checkout pod OOMs</diagnosis>",
    }
    assert call.params == {"temperature": 0.0, "seed": 7, "max_tokens": 512, "num_ctx": None}
    assert call.response_text == '{"answers": []}'
    assert (call.response_model, call.fingerprint, call.response_format) == (
        "judge-model-2025",
        "fp_1",
        "json_schema",
    )
    assert (call.prompt_tokens, call.completion_tokens, call.latency_ms) == (900, 300, 12.5)
    assert call.attempts[0]["outcome"] == "ok" and call.error_code is None

    history = await store.gradings.history(grading_id)
    assert [h.event for h in history] == ["submission.received", "judge.call", "grading.completed"]
    judge_event = history[1].payload
    assert judge_event["call_id"] == call.id and judge_event["attempts"] == 1
    assert "content" not in str(judge_event)  # no prompt text in the audit log
    assert history[2].payload["passed"] is True


async def test_an_unscored_result_is_stored_as_unscored(store: Store) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    assert await store.queue.complete(grading_id, "w1", unscored_result())
    view = await store.gradings.get(grading_id)
    assert view is not None
    assert view.grading.status == "unscored"
    assert view.grading.unscored_reason == "unparseable_reply"
    assert view.grading.passed is None and view.grading.needs_review
    calls = await store.gradings.judge_calls(grading_id)
    assert [c.purpose for c in calls] == ["grade", "repair"]
    assert [h.event for h in await store.gradings.history(grading_id)][-1] == "grading.unscored"


async def test_a_deferred_grading_stays_pending_until_retry_at(store: Store, clock: Clock) -> None:
    grading_id = (await submit(store)).grading.id
    [first] = await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    retry_at = clock() + timedelta(seconds=120)
    failed = judge_call(ok=False)
    deferred = await store.queue.defer(
        grading_id, "w1", reason="judge unreachable", retry_at=retry_at, calls=[failed],
        claim_count=first.claim_count,
    )  # fmt: skip
    assert deferred == "deferred"
    view = await store.gradings.get(grading_id)
    assert view is not None
    g = view.grading
    assert g.status == "pending" and g.pending_reason == "judge unreachable"
    assert g.lease_owner is None and g.not_before == retry_at and g.revision == 2
    [call] = await store.gradings.judge_calls(grading_id)
    assert call.error_code == "judge_unavailable" and call.response_text is None
    assert call.attempts[0]["error"] == "connection refused"
    events = [h.event for h in await store.gradings.history(grading_id)]
    assert events[-2:] == ["judge.call", "grading.deferred"]

    assert await store.queue.claim_pending("w2", limit=1, lease_seconds=60) == []
    refused = await store.queue.defer(
        grading_id, "w2", reason="x", retry_at=retry_at, calls=[], claim_count=first.claim_count
    )
    assert refused is None
    clock.advance(121)
    [claim] = await store.queue.claim_pending("w2", limit=1, lease_seconds=60)
    assert claim.claim_count == 2
    assert await store.queue.complete(grading_id, "w2", graded_result())
    calls = await store.gradings.judge_calls(grading_id)
    assert [c.position for c in calls] == [0, 1]
    assert [c.error_code for c in calls] == ["judge_unavailable", None]


async def test_queue_depth_counts_pending_gradings(store: Store, clock: Clock) -> None:
    assert await store.queue.depth() == (0, None)
    first = await submit(store)
    clock.advance(5)
    await submit(store)
    await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    count, oldest = await store.queue.depth()
    assert count == 2 and oldest == first.grading.created_at
    assert await store.queue.complete(first.grading.id, "w1", graded_result())
    count, oldest = await store.queue.depth()
    assert count == 1 and oldest is not None and oldest > first.grading.created_at


async def test_verdicts_stored_together_are_each_checked_against_their_lease(
    store: Store, engine: Engine, clock: Clock
) -> None:
    ids = [(await submit(store)).grading.id for _ in range(3)]
    await store.queue.claim_pending("w1", limit=3, lease_seconds=30)
    clock.advance(31)
    # the third grading's lease expired and another worker took it over
    await store.queue.claim_pending("w2", limit=1, lease_seconds=30)
    taken = [i for i in ids if (await store.gradings.get(i)).grading.lease_owner == "w2"]  # type: ignore[union-attr]
    items = [FinishedGrading(i, "w1", graded_result()) for i in ids]

    stored = await store.queue.complete_many(items)

    assert stored == [i not in taken for i in ids]
    for grading_id in ids:
        view = await store.gradings.get(grading_id)
        assert view is not None
        assert view.grading.status == ("pending" if grading_id in taken else "graded")
        assert len(view.answers) == (0 if grading_id in taken else 9)
    # one chain, and each grading's digest matches the tables
    report = await verify_chain(engine, key=store.db.chain_key)
    assert report.ok, report


async def test_a_stale_claims_verdict_batched_before_the_current_one_leaves_it_stored(
    store: Store, clock: Clock
) -> None:
    """One process' stale claim and its later claim of one grading in one group commit:
    the stale verdict's refusal took the grading's row out of the batch, so the current
    claim's verdict was refused too, lost, and the grading graded again later."""
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=30)
    clock.advance(31)  # the lease expired: the same process claims the grading again
    [again] = await store.queue.claim_pending("w1", limit=1, lease_seconds=30)
    stale = FinishedGrading(grading_id, "w1", graded_result(), claim_count=again.claim_count - 1)
    current = FinishedGrading(grading_id, "w1", graded_result(), claim_count=again.claim_count)
    twice = FinishedGrading(grading_id, "w1", graded_result(), claim_count=again.claim_count)

    assert await store.queue.complete_many([stale, current, twice]) == [False, True, False]
    view = await store.gradings.get(grading_id)
    assert view is not None and view.grading.status == "graded" and len(view.answers) == 9


async def test_a_batch_with_a_bad_verdict_stores_none_of_it(store: Store, engine: Engine) -> None:
    ids = [(await submit(store)).grading.id for _ in range(2)]
    await store.queue.claim_pending("w1", limit=2, lease_seconds=60)
    wrong = graded_result().model_copy(update={"rubric_version": "not-this-one"})
    items = [FinishedGrading(ids[0], "w1", graded_result()), FinishedGrading(ids[1], "w1", wrong)]

    with pytest.raises(ValueError, match="rubric"):
        await store.queue.complete_many(items)

    assert await _count(engine, AnswerRecord) == 0
    assert (await store.gradings.get(ids[0])).grading.status == "pending"  # type: ignore[union-attr]


async def test_a_lone_verdict_for_another_rubric_changes_nothing(
    store: Store, engine: Engine
) -> None:
    """A lone verdict's UPDATE runs before its rubric is compared with the grading's: the
    refusal rolls it back, lease and revision included."""
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    before = await store.gradings.get(grading_id)
    audit_rows = await _count(engine, AuditRecord)
    wrong = graded_result().model_copy(update={"rubric_version": "not-this-one"})

    with pytest.raises(ValueError, match="rubric"):
        await store.queue.complete(grading_id, "w1", wrong)

    after = await store.gradings.get(grading_id)
    assert before is not None and after is not None
    assert after.grading.model_dump() == before.grading.model_dump()
    assert after.grading.lease_owner == "w1" and after.answers == ()
    assert await _count(engine, AuditRecord) == audit_rows
    assert await store.queue.complete(grading_id, "w1", graded_result())  # its holder still can


async def test_while_a_backlog_lasts_sqlite_claims_lease_without_looking_first(
    store: Store, engine: Engine
) -> None:
    # an idle worker looks at the queue in a read transaction before it takes SQLite's
    # write lock; a worker whose last claim filled its limit leases at once
    if engine.dialect.name != "sqlite":
        pytest.skip("PostgreSQL claims with SKIP LOCKED, never looking first")
    for _ in range(3):
        await submit(store)

    async def claim(limit: int) -> tuple[int, list[str]]:
        """How many it claimed, and the kind of each statement (``BEGIN DEFERRED``,
        ``SELECT``...)."""
        with statements(engine) as sent:
            claims = await store.queue.claim_pending("w", limit=limit, lease_seconds=60)
        words = [statement.split() for statement in sent]
        return len(claims), [" ".join(w[:2]) if w[0] == "BEGIN" else w[0] for w in words]

    found, first = await claim(1)
    assert found == 1 and first[:2] == ["BEGIN DEFERRED", "SELECT"]  # looked first
    found, second = await claim(1)
    assert found == 1 and "BEGIN DEFERRED" not in second  # the backlog: leased at once
    assert second[0] == "BEGIN IMMEDIATE"
    found, _ = await claim(5)
    assert found == 1  # fewer than asked for: the queue is drained
    found, idle = await claim(1)
    # an empty queue is only looked at: the write lock is never taken
    assert found == 0 and idle == ["BEGIN DEFERRED", "SELECT"]


def test_a_claim_walks_the_claim_order_and_sorts_no_backlog(engine: Engine) -> None:
    # without an index in claim order, each claim read and sorted every pending grading
    # with its submission: a backlog of N made a claim O(N) (bench/claims.py)
    if engine.dialect.name != "sqlite":
        pytest.skip("the plan is checked on SQLite; bench/claims.py measures both")
    pick = claimable_query(utcnow(), 4, not_held_back())
    sql = str(pick.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    with engine.connect() as connection:
        plan = [row[3] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]
    assert any("ix_grading_claim_order" in step for step in plan), plan
    assert not any("TEMP B-TREE" in step for step in plan), plan
