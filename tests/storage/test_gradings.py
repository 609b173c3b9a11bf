"""Reading gradings: filters, keyset pagination, permissions by submitter, history."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy.engine import Engine

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import GradingFilter, InvalidCursor, NotFound, Store
from storage.keys import ServiceKey
from tests.conftest import Clock
from tests.storage.helpers import graded_result, new_submission, sregym_rubric, submit


async def _all_pages(store: Store, *, limit: int, **kw: object) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page, cursor = await store.gradings.page(after=cursor, limit=limit, **kw)  # type: ignore[arg-type]
        ids += [v.grading.id for v in page]
        if cursor is None:
            return ids


async def test_get_grading_returns_answers_in_rubric_order_and_the_submission(
    store: Store,
) -> None:
    outcome = await submit(store)
    pending = await store.gradings.get(outcome.grading.id)
    assert pending is not None and pending.answers == ()
    assert pending.submission.id == outcome.submission.id
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    await store.queue.complete(outcome.grading.id, "w", graded_result())
    view = await store.gradings.get(outcome.grading.id)
    assert view is not None
    assert [a.position for a in view.answers] == list(range(9))
    assert await store.gradings.get("unknown") is None


async def test_list_is_newest_first_and_pages_cover_everything_once(
    store: Store, clock: Clock
) -> None:
    ids = []
    for _ in range(7):
        ids.append((await submit(store)).grading.id)
        clock.advance(1)
    assert await _all_pages(store, limit=3) == list(reversed(ids))
    page, cursor = await store.gradings.page(limit=10)
    assert len(page) == 7 and cursor is None


async def test_pagination_is_stable_under_inserts(store: Store, clock: Clock) -> None:
    for _ in range(10):
        await submit(store)  # same clock tick for several: ties are broken by id
    clock.advance(1)
    for _ in range(5):
        await submit(store)
    before = [v.grading.id for v in (await store.gradings.page(limit=100))[0]]

    seen: list[str] = []
    page, cursor = await store.gradings.page(limit=4)
    seen += [v.grading.id for v in page]
    while cursor is not None:
        clock.advance(1)
        await submit(store)  # newer than everything: must not shift later pages
        page, cursor = await store.gradings.page(after=cursor, limit=4)
        seen += [v.grading.id for v in page]
    assert seen == before
    assert len(set(seen)) == len(seen) == 15


async def _graded_all(store: Store) -> None:
    while claims := await store.queue.claim_pending("w", limit=10, lease_seconds=60):
        for claim in claims:
            assert await store.queue.complete(claim.grading_id, "w", graded_result([]))


async def test_a_promotion_between_pages_lists_each_submission_once_where_it_was(
    store: Store, engine: Engine, clock: Clock, service_key: ServiceKey
) -> None:
    """A client reads the list page by page while a promote regrade replaces every
    grading, the one its cursor stopped on too: each submission is listed once, in the
    place it had, even among gradings listed at the same time (a replacing grading has
    an id of its own, which does not move its submission). Where superseded gradings
    are listed too, pages still cover every grading once."""
    at = clock()
    same_time = Store(engine, clock=lambda: at, key=service_key)
    for n in range(12):
        await submit(same_time, new_submission(f"diagnosis {n}"))
    await _graded_all(store)
    before = [v.submission.id for v in (await store.gradings.page(limit=100))[0]]

    page, cursor = await store.gradings.page(limit=3)
    seen = [v.submission.id for v in page]
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    job = await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    await _graded_all(store)
    later: list[str] = []
    while cursor is not None:
        page, cursor = await store.gradings.page(after=cursor, limit=3)
        seen += [v.submission.id for v in page]
        later += [v.grading.regrade_job_id or "" for v in page]
    assert seen == before
    assert later == [job.job.id] * 9  # the promoted gradings, where their submissions were

    every = GradingFilter(current_only=False)
    paged = await _all_pages(store, limit=5, filters=every)
    whole = [v.grading.id for v in (await store.gradings.page(limit=100, filters=every))[0]]
    assert paged == whole and len(set(paged)) == 24


async def test_filters(store: Store, clock: Clock) -> None:
    await store.catalog.create_scenario(id="s1", ground_truth="gt", actor="admin")
    a = await submit(store, new_submission(agent="a", model="m1"))
    clock.advance(10)
    b = await submit(
        store,
        new_submission(
            agent="b",
            model="m2",
            ground_truth="gt",
            ground_truth_source="scenario",
            scenario_id="s1",
        ),
    )
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    await store.queue.complete(a.grading.id, "w", graded_result(yes=[]))

    async def ids(**kw: object) -> set[str]:
        page, _ = await store.gradings.page(filters=GradingFilter(**kw))  # type: ignore[arg-type]
        return {v.grading.id for v in page}

    assert await ids(agent="a") == {a.grading.id}
    assert await ids(model="m2") == {b.grading.id}
    assert await ids(scenario_id="s1") == {b.grading.id}
    assert await ids(status="pending") == {b.grading.id}
    assert await ids(status="graded", passed=False) == {a.grading.id}
    assert await ids(passed=True) == set()
    assert await ids(created_after=b.grading.created_at) == {b.grading.id}
    assert await ids(created_before=b.grading.created_at) == {a.grading.id}
    assert await ids(created_after=b.grading.created_at + timedelta(seconds=1)) == set()
    assert await ids(rubric_id="sregym-rca") == {a.grading.id, b.grading.id}


async def test_submitted_by_limits_the_list_to_one_submitter(store: Store) -> None:
    mine = await submit(store, actor="tok-mine")
    await submit(store, actor="tok-other")
    page, _ = await store.gradings.page(submitted_by="tok-mine")
    assert [v.grading.id for v in page] == [mine.grading.id]


@pytest.mark.parametrize("cursor", ["garbage!", "bm90IGpzb24", "WyJ4IiwgMV0"])
async def test_a_foreign_cursor_is_rejected(store: Store, cursor: str) -> None:
    with pytest.raises(InvalidCursor):
        await store.gradings.page(after=cursor)


async def test_unknown_gradings_have_no_history_or_calls(store: Store) -> None:
    with pytest.raises(NotFound):
        await store.gradings.history("nope")
    with pytest.raises(NotFound):
        await store.gradings.judge_calls("nope")
