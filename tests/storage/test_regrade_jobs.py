"""Regrade jobs in the store: items, states, promotion, and human decisions kept final."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

import storage.queue
import storage.regrade.lifecycle as lifecycle
from api.adjudication.override_queries import OverrideQueries
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from judge.adjudication import overrides_in_force
from judge.rubric import Rubric
from judge.verdict import GradingResult
from storage import Claim, FinishedGrading, GradingFilter, GradingView, Store
from storage.canonical import utcnow
from storage.errors import Conflict, Superseded
from storage.lost_workers import LEASE_EXPIRED
from storage.overrides import override_events
from storage.review_tables import OverrideRecord
from storage.tables import GradingRecord, SubmissionRecord
from tests.conftest import Clock
from tests.storage.helpers import (
    graded_result,
    judge_call,
    new_submission,
    override,
    sregym_rubric,
    submit,
)
from tests.support.lock_waits import AuditGate, race_at_audit, wait_for_lock_waiter

ALL = ["D1-Q1", "D1-Q2", "D1-Q3", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1", "D3-Q2", "D3-Q3"]
NEW_JUDGE = "openai:new-judge@http://127.0.0.1:9/v1"


def _target(rubric: Rubric | None = None, mode: str = "shadow") -> RegradeTarget:
    return RegradeTarget(
        rubric=rubric or sregym_rubric(),
        judge_spec=NEW_JUDGE,
        judge_backend="openai",
        judge_model="new-judge",
        mode=mode,
    )


def _reworded(question_id: str = "D1-Q1", *, rule_min_yes: int | None = None) -> Rubric:
    data = sregym_rubric().model_dump(mode="json")
    for dimension in data["dimensions"]:
        for question in dimension["questions"]:
            if question["id"] == question_id:
                question["text"] += " (reworded)"
    if rule_min_yes is not None:
        data["rule"]["min_yes"] = rule_min_yes
    return Rubric.model_validate(data)


def _for(result: GradingResult, rubric: Rubric) -> GradingResult:
    return result.model_copy(update={"rubric_version": rubric.version})


async def _graded_submissions(store: Store, count: int, yes: list[str] | None = None) -> list[str]:
    ids = []
    for n in range(count):
        outcome = await submit(store)
        [claim] = await store.queue.claim_pending(f"seed{n}", limit=1, lease_seconds=60)
        assert await store.queue.complete(claim.grading_id, f"seed{n}", graded_result(yes))
        ids.append(outcome.grading.id)
    return ids


async def _grade_all(store: Store, result: GradingResult) -> int:
    done = 0
    while claims := await store.queue.claim_pending("w", limit=10, lease_seconds=60):
        for claim in claims:
            done += await store.queue.complete(claim.grading_id, "w", result)
    return done


async def test_a_job_creates_one_pending_item_per_current_grading(store: Store) -> None:
    old = await _graded_submissions(store, 3)
    view = await RegradeJobQueries(store.db).create_job(RegradeFilter(), _target(), actor="admin")
    assert (view.job.state, view.job.total, view.progress.remaining) == ("queued", 3, 3)
    claims = await store.queue.claim_pending("w", limit=10, lease_seconds=60)
    assert {c.judge_spec for c in claims} == {NEW_JUDGE}
    assert (await RegradeJobQueries(store.db).get_job(view.job.id)).job.state == "running"
    for claim in claims:
        await store.queue.complete(claim.grading_id, "w", graded_result([]))
    done = await RegradeJobQueries(store.db).get_job(view.job.id)
    assert done.job.state == "done" and done.job.finished_at is not None
    assert (done.progress.done, done.progress.failed, done.progress.remaining) == (3, 0, 0)
    # shadow: the old gradings stay current
    views, _ = await store.gradings.page(limit=10)
    assert {v.grading.id for v in views} == set(old)


async def test_a_job_naming_no_rubric_grades_each_item_with_its_gradings_rubric(
    store: Store,
) -> None:
    """A job that names no rubric stores none and grades each item with the current
    version of the rubric its grading has (stored with the job, as a job's own rubric
    is); where that rubric has no file any more, with the grading's own version."""
    await _graded_submissions(store, 2)
    graded, reworded = sregym_rubric(), _reworded()
    for current, version in (({graded.id: reworded}, reworded.version), ({}, graded.version)):
        target = dataclasses.replace(_target(), rubric=None, current=current)
        job = (await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="a")).job
        assert (job.rubric_id, job.rubric_version, job.total) == (None, None, 2)
        items = select(GradingRecord.rubric_id, GradingRecord.rubric_version).where(
            col(GradingRecord.regrade_job_id) == job.id
        )
        rows = await store.db.run_read(lambda session, q=items: session.execute(q).all())
        assert [tuple(r) for r in rows] == [(graded.id, version)] * 2
    stored = await store.db.run_read(store.catalog.read_rubric, reworded.id, reworded.version)
    assert stored is not None and stored.version == reworded.version


async def test_paused_items_are_not_claimed_and_cancel_then_resume_continues(
    store: Store,
) -> None:
    await _graded_submissions(store, 4)
    job = (await RegradeJobQueries(store.db).create_job(RegradeFilter(), _target(), actor="a")).job
    await RegradeJobQueries(store.db).change_job(job.id, "pause", actor="a")
    assert await store.queue.claim_pending("w", limit=10, lease_seconds=60) == []
    await RegradeJobQueries(store.db).change_job(job.id, "resume", actor="a")
    [first] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    await store.queue.complete(first.grading_id, "w", graded_result())
    cancelled = await RegradeJobQueries(store.db).change_job(job.id, "cancel", actor="a")
    assert cancelled.job.state == "cancelled"
    assert (cancelled.progress.done, cancelled.progress.cancelled) == (1, 3)
    assert await store.queue.claim_pending("w", limit=10, lease_seconds=60) == []
    with pytest.raises(Conflict):
        await RegradeJobQueries(store.db).change_job(job.id, "pause", actor="a")
    resumed = await RegradeJobQueries(store.db).change_job(job.id, "resume", actor="a")
    assert (resumed.job.state, resumed.progress.remaining) == ("running", 3)
    assert await _grade_all(store, graded_result()) == 3
    final = await RegradeJobQueries(store.db).get_job(job.id)
    assert final.job.state == "done" and final.progress.done == 4


async def _cancelled_with_in_flight(store: Store, in_flight: int = 1) -> tuple[str, list[Claim]]:
    """A job of 3 items cancelled while ``in_flight`` of them are with a worker ``w``."""
    await _graded_submissions(store, 3)
    jobs = RegradeJobQueries(store.db)
    job = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="a")).job
    claims = await store.queue.claim_pending("w", limit=in_flight, lease_seconds=600)
    cancelled = await jobs.change_job(job.id, "cancel", actor="a")
    assert cancelled.job.state == "cancelled"
    progress = cancelled.progress
    assert (progress.cancelled, progress.remaining) == (3 - in_flight, in_flight)
    return job.id, claims


async def _status(store: Store, grading_id: str) -> str:
    view = await store.gradings.get(grading_id)
    assert view is not None
    return view.grading.status


async def test_an_in_flight_item_deferred_after_a_cancel_is_cancelled_and_resumes(
    store: Store,
) -> None:
    """An item with the judge when its job is cancelled, deferred because the judge is
    away, becomes ``cancelled`` like the job's other unfinished items, and the deferral
    says so: the job shows nothing remaining, the queue's depth leaves it out, and resume
    brings it back."""
    job_id, [claim] = await _cancelled_with_in_flight(store)
    retry_at = store.db.clock() + timedelta(seconds=60)
    deferred = await store.queue.defer(
        claim.grading_id, "w", reason="judge_unavailable", retry_at=retry_at,
        calls=[judge_call(ok=False)], claim_count=claim.claim_count,
    )  # fmt: skip
    assert deferred == "cancelled"
    jobs = RegradeJobQueries(store.db)
    view = await jobs.get_job(job_id)
    assert await _status(store, claim.grading_id) == "cancelled"
    assert (view.progress.cancelled, view.progress.remaining) == (3, 0)
    assert (await store.queue.depth())[0] == 0
    events = [h.event for h in await store.gradings.history(claim.grading_id)]
    assert events[-3:] == ["judge.call", "grading.deferred", "grading.cancelled"]
    resumed = await jobs.change_job(job_id, "resume", actor="a")
    assert (resumed.job.state, resumed.progress.remaining) == ("running", 3)


@pytest.mark.parametrize("in_flight", [1, 2])
async def test_in_flight_items_given_back_after_a_cancel_are_cancelled(
    store: Store, in_flight: int
) -> None:
    """Items with a worker when their job is cancelled, given back unfinished (a
    graceful shutdown, one by one; the cache's fast path, several at once), become
    ``cancelled``: none is left pending in a job no worker claims from."""
    job_id, claims = await _cancelled_with_in_flight(store, in_flight)
    ids = [claim.grading_id for claim in claims]
    if in_flight == 1:
        assert await store.queue.release_lease(ids[0], "w")
    else:
        assert await store.queue.release_leases(ids, "w") == in_flight
    view = await RegradeJobQueries(store.db).get_job(job_id)
    assert [await _status(store, i) for i in ids] == ["cancelled"] * in_flight
    assert (view.progress.cancelled, view.progress.remaining) == (3, 0)
    assert await store.queue.claim_pending("w2", limit=10, lease_seconds=60) == []


async def test_an_in_flight_item_of_a_cancelled_job_whose_worker_was_killed_is_cancelled(
    store: Store, clock: Clock
) -> None:
    """An item with a worker when its job is cancelled, the worker then killed (it never
    stores, defers nor gives back the item): once its lease runs out, the next claim
    cancels it, audited as ``grading.cancelled``, so the job shows nothing remaining and
    the queue's depth leaves it out; resume brings it back."""
    job_id, [claim] = await _cancelled_with_in_flight(store)
    clock.advance(601)  # the killed worker's lease runs out
    assert await store.queue.claim_pending("w2", limit=10, lease_seconds=60) == []
    jobs = RegradeJobQueries(store.db)
    view = await jobs.get_job(job_id)
    assert await _status(store, claim.grading_id) == "cancelled"
    assert (view.progress.cancelled, view.progress.remaining) == (3, 0)
    assert (await store.queue.depth())[0] == 0
    history = await store.gradings.history(claim.grading_id)
    assert (history[-1].event, history[-1].actor) == ("grading.cancelled", "w2")
    resumed = await jobs.change_job(job_id, "resume", actor="a")
    assert (resumed.job.state, resumed.progress.remaining) == ("running", 3)


async def _lost_workers(store: Store, grading_id: str) -> list[str]:
    """The workers ``grading_id``'s history records as lost while they held it."""
    history = await store.gradings.history(grading_id)
    return [h.payload["worker"] for h in history if h.event == LEASE_EXPIRED]


@pytest.mark.postgres
async def test_a_cancel_after_an_items_worker_died_keeps_the_loss_on_record(
    store: Store, clock: Clock
) -> None:
    """Worker ``w`` is killed holding an item; its lease runs out; the job is cancelled,
    then resumed; ``w2`` takes the item. The loss of ``w`` is in the item's history (the
    cancel records it) and the claim after the resume counts it, without recording it
    again, so the losses add up towards the limit of workers an item may kill."""
    await _graded_submissions(store, 1)
    jobs = RegradeJobQueries(store.db)
    job = (await jobs.create_job(RegradeFilter(), _target(), actor="a")).job
    [held] = await store.queue.claim_pending("w", limit=1, lease_seconds=600)
    clock.advance(601)  # w was killed: its lease runs out
    cancelled = await jobs.change_job(job.id, "cancel", actor="a")
    assert cancelled.progress.cancelled == 1
    await jobs.change_job(job.id, "resume", actor="a")
    [again] = await store.queue.claim_pending("w2", limit=1, lease_seconds=600)
    assert (again.grading_id, again.lost_workers) == (held.grading_id, 1)
    assert await _lost_workers(store, held.grading_id) == ["w"]
    clock.advance(601)  # w2 killed too: the second worker this item has lost
    [third] = await store.queue.claim_pending("w3", limit=1, lease_seconds=600)
    assert await _lost_workers(store, held.grading_id) == ["w", "w2"]
    assert third.lost_workers == 2


@pytest.mark.postgres
async def test_the_sweep_of_an_abandoned_item_keeps_its_workers_loss_on_record(
    store: Store, clock: Clock
) -> None:
    """An item with ``w`` when its job is cancelled (left alone: it may finish); ``w`` is
    then killed; the next claim cancels the abandoned item; the job is resumed and the
    item claimed again. The loss of ``w`` is in the item's history, recorded by the claim
    that cancelled it, and counted by the claims after the resume."""
    job_id, [held] = await _cancelled_with_in_flight(store)
    clock.advance(601)  # w killed while the cancel left its item alone
    assert await store.queue.claim_pending("w2", limit=10, lease_seconds=600) == []
    assert await _lost_workers(store, held.grading_id) == ["w"]
    await RegradeJobQueries(store.db).change_job(job_id, "resume", actor="a")
    claims = await store.queue.claim_pending("w3", limit=10, lease_seconds=600)
    [again] = [c for c in claims if c.grading_id == held.grading_id]
    assert again.lost_workers == 1
    assert await _lost_workers(store, held.grading_id) == ["w"]
    clock.advance(601)  # w3 killed too: the second worker this item has lost
    claims = await store.queue.claim_pending("w4", limit=10, lease_seconds=600)
    [third] = [c for c in claims if c.grading_id == held.grading_id]
    assert await _lost_workers(store, held.grading_id) == ["w", "w3"]
    assert third.lost_workers == 2


async def test_a_lease_given_back_in_a_running_job_keeps_the_item_pending(store: Store) -> None:
    """An item given back while its job runs stays pending for the next worker."""
    await _graded_submissions(store, 1)
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), _target(), actor="a")
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=600)
    assert await store.queue.release_lease(claim.grading_id, "w")
    assert await _status(store, claim.grading_id) == "pending"
    [again] = await store.queue.claim_pending("w2", limit=1, lease_seconds=60)
    assert again.grading_id == claim.grading_id


async def test_the_rate_and_eta_leave_out_the_time_the_job_rested(
    store: Store, clock: Clock
) -> None:
    """An item a second, then an hour paused and an hour cancelled: the rate stays an
    item a second and the ETA of the three left is seconds, not hours."""
    await _graded_submissions(store, 5)
    jobs = RegradeJobQueries(store.db)
    job = (await jobs.create_job(RegradeFilter(), _target(), actor="a")).job
    [first] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    clock.advance(1)
    await store.queue.complete(first.grading_id, "w", graded_result())
    paused = await jobs.change_job(job.id, "pause", actor="a")
    clock.advance(3600)
    one_a_second = pytest.approx(1.0, rel=0.1)  # the test clock also moves with real time
    assert paused.progress.rate == one_a_second
    assert (await jobs.get_job(job.id)).progress.rate == one_a_second
    await jobs.change_job(job.id, "resume", actor="a")
    [second] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    clock.advance(1)
    await store.queue.complete(second.grading_id, "w", graded_result())
    await jobs.change_job(job.id, "cancel", actor="a")
    clock.advance(3600)
    resumed = await jobs.change_job(job.id, "resume", actor="a")
    assert (resumed.progress.rate, resumed.progress.remaining) == (one_a_second, 3)
    assert resumed.progress.eta_seconds == pytest.approx(3.0, rel=0.1)


async def test_promote_makes_the_new_grading_current_and_supersedes_the_old(
    store: Store,
) -> None:
    [old_id] = await _graded_submissions(store, 1)
    job = (
        await RegradeJobQueries(store.db).create_job(
            RegradeFilter(), _target(mode="promote"), actor="a"
        )
    ).job
    await _grade_all(store, graded_result([]))
    [view], _ = await store.gradings.page(limit=10)
    assert view.grading.regrade_job_id == job.id and view.grading.passed is False
    old = await store.gradings.get(old_id)
    assert old is not None
    assert old.grading.is_current is False and old.grading.superseded_by == view.grading.id
    events = [e.event for e in await store.gradings.history(view.grading.id)]
    assert "grading.promoted" in events


async def test_an_answer_override_is_carried_when_the_question_text_is_unchanged(
    store: Store,
) -> None:
    [old_id] = await _graded_submissions(store, 1, yes=ALL[:6])  # 6 yes: fails
    await override(store, old_id, rubric=sregym_rubric(),
        expected_revision=2, kind="answer", reason="quoted",
        author_id="h1", author_name="Hana", question_id="D3-Q1", answer=True,
    )  # fmt: skip
    await RegradeJobQueries(store.db).create_job(
        RegradeFilter(), _target(mode="promote"), actor="a"
    )
    await _grade_all(store, graded_result(ALL[:6]))
    [view], _ = await store.gradings.page(limit=10)
    assert view.grading.previous_grading_id == old_id
    assert view.grading.passed is True and view.grading.judge_passed is False
    assert view.grading.overridden and "override_outdated" not in view.grading.review_reasons
    [carried] = await OverrideQueries(store.db).history(view.grading.id)
    assert (carried.question_id, carried.answer, carried.author_name) == ("D3-Q1", True, "Hana")
    assert "carried by regrade job" in carried.reason


async def _item_of(store: Store, job_id: str) -> GradingView:
    views, _ = await store.gradings.page(limit=50, filters=GradingFilter(current_only=False))
    [item] = [v for v in views if v.grading.regrade_job_id == job_id]
    return item


async def test_a_reworded_question_sends_the_new_grading_to_review(store: Store) -> None:
    [old_id] = await _graded_submissions(store, 1, yes=ALL[:6])
    await override(store, old_id, rubric=sregym_rubric(),
        expected_revision=2, kind="answer", reason="r",
        author_id="h1", author_name="Hana", question_id="D1-Q1", answer=False,
    )  # fmt: skip
    reworded = _reworded("D1-Q1")
    job = (
        await RegradeJobQueries(store.db).create_job(RegradeFilter(), _target(reworded), actor="a")
    ).job
    await _grade_all(store, _for(graded_result(ALL[:6]), reworded))
    item = await _item_of(store, job.id)
    assert item.grading.needs_review and "override_outdated" in item.grading.review_reasons
    assert await OverrideQueries(store.db).history(item.grading.id) == []
    assert item.grading.overridden is False
    [current], _ = await store.gradings.page(limit=10)
    assert current.grading.id == old_id  # shadow: the old grading stays current


async def test_a_human_verdict_is_never_silently_replaced(store: Store) -> None:
    [old_id] = await _graded_submissions(store, 1, yes=ALL)
    await override(store, old_id, rubric=sregym_rubric(),
        expected_revision=2, kind="verdict", reason="wrong",
        author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    stricter = _reworded("none", rule_min_yes=8)
    target = _target(stricter, mode="promote")
    job = (await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="a")).job
    await _grade_all(store, _for(graded_result(ALL), stricter))
    item = await _item_of(store, job.id)
    assert item.grading.passed is True and "override_outdated" in item.grading.review_reasons
    [current], _ = await store.gradings.page(limit=10)
    assert current.grading.id == old_id and current.grading.passed is False


async def test_a_verdict_override_is_carried_when_the_rule_is_unchanged(store: Store) -> None:
    [old_id] = await _graded_submissions(store, 1, yes=ALL)
    await override(store, old_id, rubric=sregym_rubric(),
        expected_revision=2, kind="verdict", reason="wrong",
        author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    reworded = _reworded("D2-Q1")
    job = (
        await RegradeJobQueries(store.db).create_job(
            RegradeFilter(), _target(reworded, "promote"), actor="a"
        )
    ).job
    await _grade_all(store, _for(graded_result(ALL), reworded))
    [current], _ = await store.gradings.page(limit=10)
    assert current.grading.regrade_job_id == job.id
    assert current.grading.passed is False and current.grading.judge_passed is True
    assert [o.kind for o in await OverrideQueries(store.db).history(current.grading.id)] == [
        "verdict"
    ]


async def test_a_promotion_carries_what_a_human_decided_on_the_grading_it_replaces(
    store: Store,
) -> None:
    """Two promote jobs over one submission: the first one's grading becomes current and
    a human fails it; the second one's item, done later, replaces that grading (not the
    one both jobs were made from), so that human verdict is carried onto it and stays in
    force."""
    await _graded_submissions(store, 1, yes=ALL)
    jobs = RegradeJobQueries(store.db)
    first = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="a")).job
    second = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="a")).job
    items = await store.queue.claim_pending("w", limit=10, lease_seconds=60)
    by_job = {claim.regrade_job_id: claim.grading_id for claim in items}
    assert await store.queue.complete(by_job[first.id], "w", graded_result(ALL))
    view = await store.gradings.get(by_job[first.id])
    assert view is not None and view.grading.is_current
    await override(store, view.grading.id, rubric=sregym_rubric(),
        expected_revision=view.grading.revision, kind="verdict", reason="a human says fail",
        author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    assert await store.queue.complete(by_job[second.id], "w", graded_result(ALL))
    [current], _ = await store.gradings.page(limit=10)
    assert current.grading.id == by_job[second.id]
    assert current.grading.passed is False and current.grading.judge_passed is True
    carried = await OverrideQueries(store.db).history(current.grading.id)
    assert [(o.kind, o.author_name) for o in carried] == [("verdict", "Hana")]


@pytest.mark.postgres
async def test_pausing_a_job_while_a_worker_stores_one_of_its_items_waits_for_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin pauses a running job at the moment a worker stores one of its items:
    one transaction waits for the other and both succeed (the pause holds the job's row
    while it audits; the worker locks the job's row before it audits)."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    await _graded_submissions(store, 2)
    jobs = RegradeJobQueries(store.db)
    job = (await jobs.create_job(RegradeFilter(), _target(), actor="admin")).job
    [item, _other] = await store.queue.claim_pending("w", limit=2, lease_seconds=600)
    gate = AuditGate(monkeypatch, "regrade_job.paused")
    pause = asyncio.create_task(jobs.change_job(job.id, "pause", actor="admin"))
    assert await asyncio.to_thread(gate.arrived.wait, 10)  # the job's row is locked now
    complete = asyncio.create_task(store.queue.complete(item.grading_id, "w", graded_result([])))
    await asyncio.to_thread(wait_for_lock_waiter, store, complete.done)
    gate.go.set()
    paused, stored = await asyncio.gather(pause, complete)
    assert paused.job.state == "paused" and stored is True


@pytest.mark.postgres
async def test_a_cancel_while_a_worker_defers_one_of_its_items_cancels_it_too(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin cancels a job at the moment a worker defers one of its items (the judge
    is away): the cancel waits for the job's row, which the deferral holds while it
    audits, then finds the item without a lease and cancels it with the others."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    await _graded_submissions(store, 2)
    jobs = RegradeJobQueries(store.db)
    job = (await jobs.create_job(RegradeFilter(), _target(), actor="admin")).job
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=600)
    retry_at = store.db.clock() + timedelta(seconds=60)
    defer = store.queue.defer(
        claim.grading_id, "w", reason="judge_unavailable", retry_at=retry_at,
        claim_count=claim.claim_count,
    )  # fmt: skip
    deferred, cancelled = await race_at_audit(
        store,
        monkeypatch,
        "grading.deferred",
        defer,
        lambda: jobs.change_job(job.id, "cancel", actor="admin"),
    )
    assert deferred == "deferred"  # kept pending: the cancel, which waited, took it then
    assert (cancelled.progress.cancelled, cancelled.progress.remaining) == (2, 0)


@pytest.mark.postgres
async def test_a_lease_given_back_while_its_job_is_cancelled_waits_and_cancels_the_item(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker gives back an item's lease at the moment an admin cancels its job (the
    cancel holds the job's row while it audits, the item left alone as with the judge):
    giving it back waits for the job's row, then cancels the item."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    await _graded_submissions(store, 2)
    jobs = RegradeJobQueries(store.db)
    job = (await jobs.create_job(RegradeFilter(), _target(), actor="admin")).job
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=600)
    cancel = jobs.change_job(job.id, "cancel", actor="admin")
    _, released = await race_at_audit(
        store,
        monkeypatch,
        "regrade_job.cancelled",
        cancel,
        lambda: store.queue.release_lease(claim.grading_id, "w"),
    )
    assert released is True
    assert await _status(store, claim.grading_id) == "cancelled"
    assert (await jobs.get_job(job.id)).progress.remaining == 0


@pytest.mark.postgres
async def test_an_override_while_a_promote_job_stores_its_item_waits_for_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An adjudicator overrides a submission's current grading at the moment a worker
    stores a ``promote`` job's item of the same submission: one transaction waits for
    the other and both succeed (the override holds the grading's row while it audits;
    the worker locks the grading it promotes over before it audits)."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    [old_id] = await _graded_submissions(store, 1)
    await RegradeJobQueries(store.db).create_job(
        RegradeFilter(), _target(mode="promote"), actor="admin"
    )
    [item] = await store.queue.claim_pending("w", limit=1, lease_seconds=600)
    gate = AuditGate(monkeypatch, "grading.overridden")
    human = asyncio.create_task(
        override(store, old_id, rubric=sregym_rubric(),
            expected_revision=2, kind="verdict", reason="the judge missed the scope",
            author_id="h1", author_name="Hana", verdict="fail",
        )
    )  # fmt: skip
    assert await asyncio.to_thread(gate.arrived.wait, 10)  # the grading's row is locked now
    complete = asyncio.create_task(store.queue.complete(item.grading_id, "w", graded_result()))
    await asyncio.to_thread(wait_for_lock_waiter, store, complete.done)
    gate.go.set()
    _, stored = await asyncio.gather(human, complete)
    assert stored is True
    [current], _ = await store.gradings.page(limit=10)
    assert current.grading.id == item.grading_id and current.grading.passed is False


@pytest.mark.postgres
async def test_a_job_with_a_new_rubric_version_while_an_override_is_stored_waits_for_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An admin creates a job with a rubric version never stored before at the moment an
    adjudicator overrides a grading the job covers (the override holds the grading's row
    and is about to audit): the job inserts its items, whose foreign keys lock the
    gradings they follow, before it audits the new version, so it waits for the override
    and both succeed."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    [grading_id] = await _graded_submissions(store, 1, ALL)
    human = override(
        store, grading_id, rubric=sregym_rubric(), expected_revision=2, kind="verdict",
        reason="the judge missed the scope", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    jobs = RegradeJobQueries(store.db)
    _, created = await race_at_audit(
        store,
        monkeypatch,
        "grading.overridden",
        human,
        lambda: jobs.create_job(RegradeFilter(), _target(_reworded()), actor="admin"),
    )
    assert created.job.total == 1


class _Held:
    """Holds a transaction at a point of its code until ``go`` is set (``arrived`` is set
    when it gets there), the first time only."""

    def __init__(self) -> None:
        self.arrived, self.go = threading.Event(), threading.Event()

    def hold(self) -> None:
        if not self.go.is_set():
            self.arrived.set()
            self.go.wait(30)


def _until(condition: Callable[[], bool], seconds: float = 10) -> bool:
    """Whether ``condition()`` came true within ``seconds`` (polled)."""
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def _failed(results: Sequence[object], names: Sequence[str]) -> str:
    """Which of the transactions failed and how, for a message; empty when none did."""
    return "; ".join(
        f"{n}: {r!r}" for n, r in zip(names, results, strict=True) if isinstance(r, BaseException)
    )


@pytest.mark.postgres
async def test_an_override_of_the_grading_a_second_promote_replaces_waits_for_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ``promote`` jobs' items of one submission are stored at once (the second
    waits for the first), and an adjudicator overrides the grading the first made current
    while the second is storing its own: the override waits for the second promote and
    is then refused as superseded, naming the grading in force. Neither transaction is
    aborted (the second promote locks the grading it replaces, the current one as the
    first left it, before it audits)."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    await _graded_submissions(store, 1)
    jobs = RegradeJobQueries(store.db)
    a = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    b = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    claims = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
    item = {c.regrade_job_id: c.grading_id for c in claims}
    # B's promote held once it has audited its verdict (the audit chain's lock held),
    # before it looks for the grading it replaces
    held = _Held()
    real = lifecycle._current_besides

    def gated(db: Any, session: Any, grading: Any) -> Any:
        if grading.id == item[b.id]:
            held.hold()
        return real(db, session, grading)

    monkeypatch.setattr(lifecycle, "_current_besides", gated)
    gate = AuditGate(monkeypatch, "grading.completed")
    first = asyncio.create_task(store.queue.complete(item[a.id], "w", graded_result()))
    assert await asyncio.to_thread(gate.arrived.wait, 10)
    second = asyncio.create_task(store.queue.complete(item[b.id], "w", graded_result([])))
    await asyncio.to_thread(wait_for_lock_waiter, store, second.done)  # B waits for A
    gate.go.set()
    assert await first is True
    assert await asyncio.to_thread(held.arrived.wait, 10)
    view = await store.gradings.get(item[a.id])
    assert view is not None and view.grading.is_current  # A's, current until B commits
    human = asyncio.create_task(
        override(store, item[a.id], rubric=sregym_rubric(),
            expected_revision=view.grading.revision, kind="verdict", reason="scope missed",
            author_id="h1", author_name="Hana", verdict="fail",
        )
    )  # fmt: skip
    await asyncio.to_thread(wait_for_lock_waiter, store, human.done)
    held.go.set()
    results = await asyncio.gather(second, human, return_exceptions=True)
    assert results[0] is True and isinstance(results[1], Superseded), _failed(
        results, ["the second promote", "the override"]
    )
    [current], _ = await store.gradings.page(limit=10)
    assert current.grading.id == item[b.id]


@pytest.mark.postgres
async def test_overrides_of_the_grading_a_shadow_item_follows_while_it_is_stored_succeed(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two adjudicators override the grading a regrade item follows while a worker
    stores the item (the first once the worker has locked what it locks, before its
    audit; the second while the worker carries what it found): every transaction
    succeeds, and the item carries exactly the overrides stored before it (an override
    of the previous grading waits for the item's transaction, which keeps it from
    changing until it commits)."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    [old_id] = await _graded_submissions(store, 1, ALL[:6])
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), _target(), actor="admin")
    [item] = await store.queue.claim_pending("w", limit=1, lease_seconds=600)
    locked, carrying = _Held(), _Held()
    real_lock, real_carry = storage.queue.lock_items, lifecycle.carry_overrides

    def lock_then_hold(*args: Any, **kw: Any) -> Any:
        out = real_lock(*args, **kw)
        locked.hold()  # its row locks taken; its audit not appended yet
        return out

    def hold_then_carry(*args: Any, **kw: Any) -> Any:
        carrying.hold()  # the audit chain's lock held
        return real_carry(*args, **kw)

    monkeypatch.setattr(storage.queue, "lock_items", lock_then_hold)
    monkeypatch.setattr(lifecycle, "carry_overrides", hold_then_carry)

    def answer(question_id: str, author: str) -> Awaitable[object]:
        return override(store, old_id, rubric=sregym_rubric(),
            expected_revision=None, kind="answer", reason="quoted", author_id=author,
            author_name=author, question_id=question_id, answer=True,
        )  # fmt: skip

    worker = asyncio.create_task(store.queue.complete(item.grading_id, "w", graded_result()))
    assert await asyncio.to_thread(locked.arrived.wait, 10)
    first = asyncio.create_task(answer("D3-Q1", "h1"))
    await asyncio.to_thread(wait_for_lock_waiter, store, first.done)  # stored, or waiting
    locked.go.set()
    # the worker carries the overrides it found (held there), or has none to carry
    assert await asyncio.to_thread(_until, lambda: carrying.arrived.is_set() or worker.done())
    second = asyncio.create_task(answer("D3-Q2", "h2"))
    await asyncio.to_thread(wait_for_lock_waiter, store, second.done)
    carrying.go.set()
    results = await asyncio.gather(worker, first, second, return_exceptions=True)
    assert not _failed(results, ["the worker", "the first override", "the second"])
    assert results[0] is True
    carried = await OverrideQueries(store.db).history(item.grading_id)
    assert [o.question_id for o in carried] == (["D3-Q1"] if carrying.arrived.is_set() else [])


@pytest.mark.postgres
async def test_promote_jobs_and_overrides_of_one_submission_at_once_all_finish(
    store: Store,
) -> None:
    """Round after round, two ``promote`` jobs' items of one submission are stored at
    once while an adjudicator overrides the grading the first made current as soon as it
    is: no transaction is aborted (an override that comes too late is refused as
    superseded) and every submission keeps one current grading."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    rounds = 20
    await _graded_submissions(store, rounds)
    jobs = RegradeJobQueries(store.db)
    a = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    b = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    claims = await store.queue.claim_pending("w", limit=100, lease_seconds=600)
    by_submission: dict[str, dict[str, str]] = {}
    for c in claims:
        by_submission.setdefault(c.submission_id, {})[c.regrade_job_id] = c.grading_id
    assert len(by_submission) == rounds
    failures: list[str] = []
    for items in by_submission.values():
        first = asyncio.create_task(store.queue.complete(items[a.id], "w", graded_result()))
        second = asyncio.create_task(store.queue.complete(items[b.id], "w", graded_result([])))
        assert await first is True
        human = override(store, items[a.id], rubric=sregym_rubric(),
            expected_revision=None, kind="verdict", reason="scope", author_id="h1",
            author_name="Hana", verdict="fail",
        )  # fmt: skip
        promoted, overridden = await asyncio.gather(second, human, return_exceptions=True)
        if isinstance(overridden, Superseded):
            overridden = None  # came after the second promote: refused, as it should be
        if failed := _failed([promoted, overridden], ["the second promote", "the override"]):
            failures.append(failed)
    assert not failures, f"{len(failures)} of {rounds} rounds failed: {failures[0]}"

    def current_per_submission(session: Session) -> dict[str, int]:
        g = GradingRecord
        query = select(col(g.submission_id), func.count()).where(col(g.is_current).is_(True))
        return {s: n for s, n in session.execute(query.group_by(col(g.submission_id)))}

    assert await store.db.run_read(current_per_submission) == dict.fromkeys(by_submission, 1)


@pytest.mark.postgres
@pytest.mark.tampers
async def test_a_shadow_batch_and_a_promote_batch_of_the_same_submissions_both_finish(
    store: Store,
) -> None:
    """Two graded submissions, the older grading holding the greater id; a shadow job and
    a promote job over both. A worker stores the promote job's two items in one batch
    while another stores the shadow job's two, and a third transaction holds ``FOR KEY
    SHARE`` on the older grading for a moment (as any writer of a row under it does):
    both batches store their items, neither is aborted (the gradings one follows are the
    ones the other promotes over, and both lock them in one order)."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    low, high = sorted(await _graded_submissions(store, 2))
    now = utcnow()

    def older_is_high(session: Session) -> None:
        for grading_id, at in ((high, now - timedelta(hours=2)), (low, now - timedelta(hours=1))):
            row = col(GradingRecord.id) == grading_id
            session.execute(update(GradingRecord).where(row).values(created_at=at))

    await store.db.run(older_is_high)
    jobs = RegradeJobQueries(store.db)
    shadow = (await jobs.create_job(RegradeFilter(), _target(), actor="admin")).job
    promote = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    claims = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
    assert len(claims) == 4
    by_job: dict[str | None, list[FinishedGrading]] = {}
    for c in claims:
        item = FinishedGrading(c.grading_id, "w", graded_result(), False)
        by_job.setdefault(c.regrade_job_id, []).append(item)
    url = store.db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url) as other:
        other.execute("SELECT id FROM grading WHERE id = %s FOR KEY SHARE", (high,)).fetchall()
        promoting = asyncio.create_task(store.queue.complete_many(by_job[promote.id]))
        await asyncio.to_thread(wait_for_lock_waiter, store, promoting.done)
        shadowing = asyncio.create_task(store.queue.complete_many(by_job[shadow.id]))
        await asyncio.sleep(0.5)
        other.commit()
    results = await asyncio.gather(promoting, shadowing, return_exceptions=True)
    assert not _failed(results, ["the promote batch", "the shadow batch"])
    assert results == [[True, True], [True, True]]


def _in_force_on(session: Session, grading_id: str) -> dict[Any, Any]:
    """The overrides in force on the grading."""
    query = select(OverrideRecord).where(col(OverrideRecord.grading_id) == grading_id)
    return overrides_in_force(override_events(list(session.execute(query).scalars())))


@pytest.mark.postgres
async def test_a_withdrawal_racing_a_promote_over_a_grading_carrying_its_copy_withdraws_it(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hana failed G0; two ``promote`` jobs followed it, and the first carried her verdict
    onto G1 and made it current (G1's id sorts before G0's). Hana withdraws her verdict
    on G0 at the moment a worker stores the second job's item, which follows G0 and
    promotes over G1: both succeed (the worker locks G0 before G1, as the withdrawal
    does), and no copy of the verdict stays in force."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    [g0] = await _graded_submissions(store, 1, ALL)
    original, _ = await override(
        store, g0, rubric=sregym_rubric(), expected_revision=2, kind="verdict",
        reason="wrong fault", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    # the items' ids sort before every other: before G0's
    monkeypatch.setattr("api.regrade.job_queries.new_id", lambda: "0" * 8 + uuid4().hex[8:])
    jobs = RegradeJobQueries(store.db)
    a = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    b = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    claims = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
    item = {c.regrade_job_id: c.grading_id for c in claims}
    g1, g2 = item[a.id], item[b.id]
    assert g1 < g0 and await store.queue.complete(g1, "w", graded_result(ALL))
    # the withdrawal held once it holds G0 and G1, before it looks for copies made meanwhile
    held = _Held()
    real = OverrideQueries._copies_locked

    def hold_then_lock(self: OverrideQueries, session: Session, *a: Any, **kw: Any) -> Any:
        held.hold()
        return real(self, session, *a, **kw)

    monkeypatch.setattr(OverrideQueries, "_copies_locked", hold_then_lock)
    view = await store.gradings.get(g0)
    assert view is not None
    withdrawal = asyncio.create_task(
        override(store, g0, rubric=sregym_rubric(), expected_revision=view.grading.revision,
            kind="withdraw", reason="I was wrong", author_id="h1", author_name="Hana",
            withdraws=original.id,
        )
    )  # fmt: skip
    assert await asyncio.to_thread(held.arrived.wait, 10)
    worker = asyncio.create_task(store.queue.complete(g2, "w", graded_result(ALL)))
    await asyncio.to_thread(wait_for_lock_waiter, store, worker.done)  # it waits for G0
    held.go.set()
    results = await asyncio.gather(withdrawal, worker, return_exceptions=True)
    assert not _failed(results, ["the withdrawal", "the worker"])
    assert results[1] is True
    assert await store.db.run_read(_in_force_on, g1) == {}
    assert await store.db.run_read(_in_force_on, g2) == {}
    current = await store.gradings.get(g2)
    assert current is not None and current.grading.is_current and current.grading.passed


@pytest.mark.postgres
async def test_a_withdrawal_racing_a_promote_over_the_copies_of_a_copy_withdraws_them(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hana failed G0; a promote carried her verdict onto G1, and a second one carried
    that copy onto G2 (each made current; G2's id sorts before G1's). Hana withdraws her
    verdict on G0 at the moment a worker stores a third promote's item, which follows
    G1 and promotes over G2: both succeed (the withdrawal locks G1 before G2, as the
    worker does), and no copy of the verdict stays in force."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    [g0] = await _graded_submissions(store, 1, ALL)
    original, _ = await override(
        store, g0, rubric=sregym_rubric(), expected_revision=2, kind="verdict",
        reason="wrong fault", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    # every id a job makes sorts before the one it made last
    descending = iter(range(0xFFFFFFFF, 0, -1))
    monkeypatch.setattr(
        "api.regrade.job_queries.new_id", lambda: f"{next(descending):08x}{uuid4().hex[8:]}"
    )
    jobs = RegradeJobQueries(store.db)

    async def promote_claimed(count: int) -> list[str]:
        for _ in range(count):
            await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")
        claims = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
        return sorted((c.grading_id for c in claims), reverse=True)  # oldest first

    [g1] = await promote_claimed(1)
    assert await store.queue.complete(g1, "w", graded_result(ALL))
    g2, g3 = await promote_claimed(2)
    assert await store.queue.complete(g2, "w", graded_result(ALL))
    # the withdrawal held once it holds G0 and the first grading of a copy it locks
    held = _Held()
    real = OverrideQueries._locked_grading

    def lock_then_hold(
        self: OverrideQueries, session: Session, grading_id: str, *a: Any, **kw: Any
    ) -> Any:
        grading = real(self, session, grading_id, *a, **kw)
        if grading_id != g0:
            held.hold()
        return grading

    monkeypatch.setattr(OverrideQueries, "_locked_grading", lock_then_hold)
    view = await store.gradings.get(g0)
    assert view is not None
    withdrawal = asyncio.create_task(
        override(store, g0, rubric=sregym_rubric(), expected_revision=view.grading.revision,
            kind="withdraw", reason="I was wrong", author_id="h1", author_name="Hana",
            withdraws=original.id,
        )
    )  # fmt: skip
    assert await asyncio.to_thread(held.arrived.wait, 10)
    worker = asyncio.create_task(store.queue.complete(g3, "w", graded_result(ALL)))
    await asyncio.to_thread(wait_for_lock_waiter, store, worker.done)
    held.go.set()
    results = await asyncio.gather(withdrawal, worker, return_exceptions=True)
    assert not _failed(results, ["the withdrawal", "the worker"])
    assert results[1] is True
    for grading_id in (g1, g2, g3):
        assert await store.db.run_read(_in_force_on, grading_id) == {}, grading_id
    current = await store.gradings.get(g3)
    assert current is not None and current.grading.is_current and current.grading.passed


@pytest.mark.postgres
async def test_a_withdrawal_racing_a_promote_over_an_older_grading_carrying_its_copy_withdraws_it(
    store: Store, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    """Two ``promote`` jobs B and A were made over G0 in that order; A's item A1 was
    stored first and made current, and Hana failed it; then a third one, C, was made
    (its item C1 follows A1), and B's item B1 promoted over A1, carrying her verdict
    onto B1, which is older than A1. Hana withdraws her verdict on A1 at the moment a worker
    stores C1, a promote that follows A1 and replaces B1: both succeed (the withdrawal
    locks B1 and A1 oldest first, as the worker does), and no copy of the verdict stays
    in force."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    await _graded_submissions(store, 1, ALL)
    jobs = RegradeJobQueries(store.db)
    b = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    clock.advance(1)
    a = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    claims = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
    item = {c.regrade_job_id: c.grading_id for c in claims}
    a1, b1 = item[a.id], item[b.id]
    assert await store.queue.complete(a1, "w", graded_result(ALL))
    view = await store.gradings.get(a1)
    assert view is not None and view.grading.is_current
    original, _ = await override(
        store, a1, rubric=sregym_rubric(), expected_revision=view.grading.revision,
        kind="verdict", reason="wrong fault", author_id="h1", author_name="Hana",
        verdict="fail",
    )  # fmt: skip
    clock.advance(1)
    c = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    assert await store.queue.complete(b1, "w", graded_result(ALL))  # carries from A1
    [claim] = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
    assert claim.regrade_job_id == c.id
    c1 = claim.grading_id
    assert await store.db.run_read(_in_force_on, b1) != {}
    # the withdrawal held once it holds B1 and A1, before it looks for copies made meanwhile
    held = _Held()
    real = OverrideQueries._copies_locked

    def hold_then_lock(self: OverrideQueries, session: Session, *a: Any, **kw: Any) -> Any:
        held.hold()
        return real(self, session, *a, **kw)

    monkeypatch.setattr(OverrideQueries, "_copies_locked", hold_then_lock)
    view = await store.gradings.get(a1)
    assert view is not None
    withdrawal = asyncio.create_task(
        override(store, a1, rubric=sregym_rubric(), expected_revision=view.grading.revision,
            kind="withdraw", reason="I was wrong", author_id="h1", author_name="Hana",
            withdraws=original.id,
        )
    )  # fmt: skip
    assert await asyncio.to_thread(held.arrived.wait, 10)
    worker = asyncio.create_task(store.queue.complete(c1, "w", graded_result(ALL)))
    await asyncio.to_thread(wait_for_lock_waiter, store, worker.done)
    held.go.set()
    results = await asyncio.gather(withdrawal, worker, return_exceptions=True)
    assert not _failed(results, ["the withdrawal", "the worker"])
    assert results[1] is True
    for grading_id in (b1, c1):
        assert await store.db.run_read(_in_force_on, grading_id) == {}, grading_id
    current = await store.gradings.get(c1)
    assert current is not None and current.grading.is_current and current.grading.passed


async def test_the_filter_selects_by_agent_verdict_judge_scenario_tags_and_date(
    store: Store, clock: Clock
) -> None:
    await store.catalog.create_scenario(
        id="s-tagged", ground_truth="g", tags=["net", "hotel"], actor="t"
    )
    for n, agent in enumerate(["a", "a", "b"]):
        data = new_submission(agent=agent)
        if n == 2:
            data = new_submission(
                agent=agent, scenario_id="s-tagged", ground_truth_source="scenario"
            )
        await submit(store, data)
        [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
        await store.queue.complete(claim.grading_id, "w", graded_result(ALL if n else []))
        clock.advance(3600)
    pending = await submit(store)  # a pending current grading is left to its workers
    del pending
    cases = {
        RegradeFilter(): 3,
        RegradeFilter(agent="a"): 2,
        RegradeFilter(passed=True): 2,
        RegradeFilter(agent="a", passed=False): 1,
        RegradeFilter(judge="openai:judge-model"): 3,
        RegradeFilter(judge="external:sregym"): 0,
        RegradeFilter(rubric_version=f"sregym-rca@{sregym_rubric().version}"): 3,
        RegradeFilter(rubric_version="sregym-rca"): 3,  # an id alone, as report filters take
        RegradeFilter(rubric_version=sregym_rubric().version): 3,  # a version alone
        RegradeFilter(rubric_version="other-rubric"): 0,
        RegradeFilter(ground_truth_source="scenario"): 1,
        RegradeFilter(ground_truth_source="inline"): 2,
        RegradeFilter(run_id="no-such-run"): 0,
        RegradeFilter(tags=("net",)): 1,
        RegradeFilter(tags=("net", "nope")): 0,
        RegradeFilter(scenario_id="s-tagged"): 1,
        RegradeFilter(created_before=clock() - timedelta(seconds=3 * 3600)): 1,
    }
    for f, expected in cases.items():
        assert (await RegradeJobQueries(store.db).totals(f)).submissions == expected, f


async def _graded_pairs(store: Store, count: int) -> list[tuple[str, str]]:
    """(submission id, grading id) of ``count`` graded submissions, in order."""
    out = []
    for n in range(count):
        outcome = await submit(store)
        [claim] = await store.queue.claim_pending(f"seed{n}", limit=1, lease_seconds=60)
        assert await store.queue.complete(claim.grading_id, f"seed{n}", graded_result())
        out.append((outcome.grading.submission_id, outcome.grading.id))
    return out


@pytest.mark.postgres
@pytest.mark.tampers
async def test_a_promote_batch_and_a_new_job_over_the_same_submissions_both_finish(
    store: Store,
) -> None:
    """Two graded submissions S1 (older) and S2, whose current gradings are X1 (newer)
    and X2 (older: S1 was graded again later, say). A worker stores a promote job's two
    items while an admin creates another job over both submissions: the batch locks X2
    then X1 (oldest first), the new job's items follow X1 then X2 (submission order),
    their foreign keys taking FOR KEY SHARE on each. A third transaction holding FOR KEY
    SHARE on X1 for a moment (as any writer of a row under it does) lines the two up.
    Both finish: a promotion locks what it writes FOR NO KEY UPDATE, which a foreign
    key's lock does not wait for."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    (s1, x1), (s2, x2) = await _graded_pairs(store, 2)
    now = utcnow()

    def shape(session: Session) -> None:
        for sid, at in ((s1, now - timedelta(hours=3)), (s2, now - timedelta(hours=2))):
            row = col(SubmissionRecord.id) == sid
            session.execute(update(SubmissionRecord).where(row).values(created_at=at))
        for gid, at in ((x2, now - timedelta(hours=2)), (x1, now - timedelta(hours=1))):
            row = col(GradingRecord.id) == gid
            session.execute(update(GradingRecord).where(row).values(created_at=at))

    await store.db.run(shape)
    jobs = RegradeJobQueries(store.db)
    promote = (await jobs.create_job(RegradeFilter(), _target(mode="promote"), actor="admin")).job
    claims = await store.queue.claim_pending("w", limit=10, lease_seconds=600)
    assert {c.regrade_job_id for c in claims} == {promote.id} and len(claims) == 2
    items = [FinishedGrading(c.grading_id, "w", graded_result(), False) for c in claims]
    url = store.db.engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url) as other:
        other.execute("SELECT id FROM grading WHERE id = %s FOR KEY SHARE", (x1,)).fetchall()
        promoting = asyncio.create_task(store.queue.complete_many(items))
        # as it stands, the batch holds X2 and waits for X1 (a batch that does not wait
        # for a KEY SHARE holder just goes on)
        await asyncio.to_thread(wait_for_lock_waiter, store, promoting.done, 3)
        creating = asyncio.create_task(jobs.create_job(RegradeFilter(), _target(), actor="admin"))
        # the new job holds X1 (KEY SHARE) and waits for X2
        await asyncio.to_thread(wait_for_lock_waiter, store, creating.done, 3, count=2)
        other.commit()
    results = await asyncio.gather(promoting, creating, return_exceptions=True)
    failed = [
        f"{name}: {r!r}"
        for name, r in zip(("the promote batch", "the new job"), results, strict=True)
        if isinstance(r, BaseException)
    ]
    assert not failed, failed
    assert results[0] == [True, True]
