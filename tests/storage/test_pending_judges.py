"""Pending gradings by judge, and moving them to another judge: once, audited, never a
regrade item, never under a worker's live lease unless taken from it, never forgetting a
worker lost while grading."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import AuditRecord, FinishedGrading, Store, verify_chain
from storage.queue import LEASE_EXPIRED
from tests.conftest import Clock
from tests.storage.helpers import JUDGE_SPEC, graded_result, new_submission, sregym_rubric, submit

NEW = ("openai:new@http://127.0.0.1:8081/v1", "openai", "new")
NEWER = ("openai:newer@http://127.0.0.1:8081/v1", "openai", "newer")


async def _moves(store: Store) -> list[dict]:
    query = select(AuditRecord).where(AuditRecord.event == "grading.judge_moved")
    with store.db.sessions(read=True)() as session, session.begin():
        rows = (session.execute(query.order_by(AuditRecord.seq))).scalars().all()
    return [{"actor": r.actor, **r.payload} for r in rows]


async def test_moving_binds_free_pending_gradings_once_and_audits_each(store: Store) -> None:
    free = [(await submit(store, new_submission(f"d{i}"))).grading.id for i in range(3)]
    leased = (await submit(store, new_submission("held"))).grading.id
    claims = await store.queue.claim_pending("w1", limit=10, lease_seconds=300)
    for claim in claims:  # w1 keeps one lease, gives the others back
        if claim.grading_id != leased:
            await store.queue.release_lease(claim.grading_id, "w1")

    moved = await store.pending_judges.move(NEW, actor="w2", reason="configured judge changed")
    again = await store.pending_judges.move(NEW, actor="w2", reason="configured judge changed")

    assert sorted(moved) == sorted(free) and again == []  # the leased one waits for its claim
    for grading_id in free:
        view = await store.gradings.get(grading_id)
        assert (view.grading.judge_spec, view.grading.judge_model) == (NEW[0], "new")
        assert view.grading.status == "pending" and view.grading.revision == 2
    assert (await store.gradings.get(leased)).grading.judge_spec == JUDGE_SPEC
    moves = await _moves(store)
    assert sorted(m["grading_id"] for m in moves) == sorted(free)
    assert {(m["from"], m["to"], m["actor"]) for m in moves} == {(JUDGE_SPEC, NEW[0], "w2")}
    assert (await verify_chain(store.engine, key=store.db.chain_key)).ok
    by_judge = {(p.judge_spec, p.live): p.count for p in await store.pending_judges.by_judge()}
    assert by_judge == {(NEW[0], True): 3, (JUDGE_SPEC, True): 1}


async def test_the_claiming_worker_moves_its_grading_and_keeps_the_lease(store: Store) -> None:
    grading_id = (await submit(store)).grading.id
    [claim] = await store.queue.claim_pending("w1", limit=1, lease_seconds=300)
    assert claim.regrade_job_id is None  # a live grading: it follows the configured judge

    move = store.pending_judges.move_claimed
    assert not await move(grading_id, "w2", NEW, reason="r", claim_count=claim.claim_count)
    assert not await move(grading_id, "w1", NEW, reason="r", claim_count=claim.claim_count + 1)
    assert await move(grading_id, "w1", NEW, reason="r", claim_count=claim.claim_count)
    view = await store.gradings.get(grading_id)
    assert view.grading.judge_spec == NEW[0] and view.grading.lease_owner == "w1"
    stored = await store.queue.complete_many([FinishedGrading(grading_id, "w1", graded_result())])
    assert stored == [True]
    assert [m["grading_id"] for m in await _moves(store)] == [grading_id]
    assert (await verify_chain(store.engine, key=store.db.chain_key)).ok


async def test_an_admin_move_takes_the_lease_and_the_old_result_is_discarded(
    store: Store,
) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=300)
    moved = await store.pending_judges.move(
        NEW, actor="admin-1", reason="moved by an admin", from_spec=JUDGE_SPEC, take_leased=True
    )
    assert moved == [grading_id]
    # the worker that was asking the old judge can no longer store its verdict
    late = await store.queue.complete_many([FinishedGrading(grading_id, "w1", graded_result())])
    assert late == [False]
    [claim] = await store.queue.claim_pending("w2", limit=1, lease_seconds=300)
    assert claim.judge_spec == NEW[0]


async def test_the_old_result_is_discarded_when_the_same_process_claims_it_again(
    store: Store,
) -> None:
    """Every task of a process shares its worker id: once the process claimed the moved
    grading again, the task still asking the old judge held "the lease" too, and its
    verdict was stored under the new judge. An outcome is of its claim."""
    grading_id = (await submit(store)).grading.id
    [old] = await store.queue.claim_pending("w1", limit=1, lease_seconds=300)
    moved = await store.pending_judges.move(
        NEW, actor="admin-1", reason="moved by an admin", from_spec=JUDGE_SPEC, take_leased=True
    )
    assert moved == [grading_id]
    [new] = await store.queue.claim_pending("w1", limit=1, lease_seconds=300)
    assert new.claim_count == old.claim_count + 1 and new.judge_spec == NEW[0]
    late = FinishedGrading(grading_id, "w1", graded_result(), claim_count=old.claim_count)
    assert await store.queue.complete_many([late]) == [False]
    deferred = await store.queue.defer(
        grading_id, "w1", reason="judge_unavailable", retry_at=store.db.clock(),
        claim_count=old.claim_count,
    )  # fmt: skip
    assert deferred is None
    current = FinishedGrading(grading_id, "w1", graded_result(), claim_count=new.claim_count)
    assert await store.queue.complete_many([current]) == [True]


@pytest.mark.parametrize("who", ["follow", "admin"])
async def test_a_worker_lost_before_a_move_is_counted_by_the_next_claim(
    store: Store, clock: Clock, who: str
) -> None:
    """A grading whose lease ran out in its worker's hands (killed, or cut off from the
    database) and that then moves to another judge, on a restart or by an admin, keeps
    that loss: it is audited once, the next claim counts it, and the lost worker can
    neither keep the lease nor store its old judge's verdict."""
    grading_id = (await submit(store)).grading.id
    [dead] = await store.queue.claim_pending("dead", limit=1, lease_seconds=30)
    clock.advance(31)

    if who == "follow":
        moved = await store.pending_judges.move(NEW, actor="w", reason="configured judge changed")
    else:
        moved = await store.pending_judges.move(
            NEW, actor="admin-1", reason="moved by an admin", from_spec=JUDGE_SPEC,
            take_leased=True,
        )  # fmt: skip
    assert moved == [grading_id]

    assert not await store.queue.extend_lease(grading_id, "dead", 30)
    late = FinishedGrading(grading_id, "dead", graded_result(), claim_count=dead.claim_count)
    assert await store.queue.complete_many([late]) == [False]
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=30)
    assert claim.judge_spec == NEW[0] and claim.lost_workers == 1
    history = [h for h in await store.gradings.history(grading_id) if h.event == LEASE_EXPIRED]
    assert [(h.payload["worker"], h.payload["claim_count"]) for h in history] == [("dead", 1)]
    assert (await verify_chain(store.engine, key=store.db.chain_key)).ok


async def test_workers_lost_across_judge_moves_add_up(store: Store, clock: Clock) -> None:
    """Three workers lost while grading one grading, each loss followed by a restart with
    another judge, and one more restart before it is claimed again: the fourth claim is
    told of all three (and its worker unscores the grading without asking a judge again)."""
    grading_id = (await submit(store)).grading.id
    for n, judge in enumerate([NEW, NEWER, NEW]):
        await store.queue.claim_pending(f"dead-{n}", limit=1, lease_seconds=30)
        clock.advance(31)
        assert await store.pending_judges.move(judge, actor="w", reason="r") == [grading_id]
    assert await store.pending_judges.move(NEWER, actor="w", reason="r") == [grading_id]
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=30)
    assert claim.lost_workers == 3


async def test_items_of_a_regrade_job_keep_their_jobs_judge(store: Store, clock: Clock) -> None:
    grading_id = (await submit(store)).grading.id
    await store.queue.claim_pending("w1", limit=1, lease_seconds=60)
    await store.queue.complete_many([FinishedGrading(grading_id, "w1", graded_result())])
    clock.advance(1)
    target = RegradeTarget(
        rubric=sregym_rubric(),
        judge_spec="openai:job-judge@http://127.0.0.1:8082/v1",
        judge_backend="openai",
        judge_model="job-judge",
        mode="shadow",
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")

    assert await store.pending_judges.move(NEW, actor="w", reason="r") == []
    by_judge = await store.pending_judges.by_judge()
    assert [(p.judge_spec, p.live, p.count) for p in by_judge] == [(target.judge_spec, False, 1)]
