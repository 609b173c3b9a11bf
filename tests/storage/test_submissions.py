"""Submissions, idempotency keys, scenarios and rubric versions."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from storage import (
    Conflict,
    GradingRecord,
    IdempotencyConflict,
    NewSubmission,
    NotFound,
    Store,
    SubmissionRecord,
)
from storage.engine import session_factory
from tests.storage.helpers import new_submission, sregym_rubric, submit


async def _count(engine: Engine, model: type) -> int:
    with session_factory(engine)() as session:
        return (session.execute(select(func.count()).select_from(model))).scalar_one()


async def test_a_submission_is_stored_with_a_pending_grading(store: Store) -> None:
    outcome = await submit(store)
    assert outcome.created
    submission, grading = outcome.submission, outcome.grading
    assert grading.submission_id == submission.id
    assert grading.status == "pending"
    assert (grading.rubric_id, grading.rubric_version) == ("sregym-rca", sregym_rubric().version)
    assert grading.is_current and grading.revision == 1 and grading.claim_count == 0
    stored = await store.submissions.get(submission.id)
    assert stored is not None
    assert stored.metadata_ == {"harness": "tests"}
    assert stored.submitted_by == "tok-1"
    assert stored.created_at.tzinfo is not None
    assert len(submission.request_hash) == 64


async def test_same_key_and_body_replays_the_first_submission(store: Store, engine) -> None:
    first = await submit(store, idempotency_key="k1")
    again = await submit(store, idempotency_key="k1")
    assert not again.created
    assert again.submission.id == first.submission.id
    assert again.grading.id == first.grading.id
    assert await _count(engine, SubmissionRecord) == 1


async def test_same_key_with_a_different_body_is_a_conflict(store: Store, engine) -> None:
    await submit(store, idempotency_key="k1")
    with pytest.raises(IdempotencyConflict):
        await submit(store, new_submission("something else"), idempotency_key="k1")
    assert await _count(engine, SubmissionRecord) == 1


async def test_keys_are_scoped_to_the_submitter(store: Store) -> None:
    a = await submit(store, actor="tok-a", idempotency_key="k1")
    b = await submit(store, actor="tok-b", idempotency_key="k1")
    assert a.created and b.created
    assert a.submission.id != b.submission.id


async def test_without_a_key_every_request_is_new(store: Store) -> None:
    a = await submit(store)
    b = await submit(store)
    assert a.submission.id != b.submission.id


async def test_concurrent_identical_requests_store_one_submission(store: Store, engine) -> None:
    outcomes = await asyncio.gather(*(submit(store, idempotency_key="race") for _ in range(6)))
    assert sum(o.created for o in outcomes) == 1
    assert len({o.submission.id for o in outcomes}) == 1
    assert len({o.grading.id for o in outcomes}) == 1
    assert await _count(engine, SubmissionRecord) == 1
    assert await _count(engine, GradingRecord) == 1


async def test_a_scenario_submission_needs_an_existing_scenario(store: Store) -> None:
    data = new_submission(ground_truth_source="scenario", scenario_id="nope")
    with pytest.raises(NotFound):
        await submit(store, data)


def test_a_scenario_source_needs_a_scenario_id() -> None:
    with pytest.raises(ValueError, match="scenario_id"):
        NewSubmission(diagnosis="d", ground_truth="g", ground_truth_source="scenario")


async def test_scenarios_are_created_once_and_audited_without_their_ground_truth(
    store: Store,
) -> None:
    created = await store.catalog.create_scenario(
        id="k8s-oom-1", ground_truth="secret truth", title="OOM", tags=["oom"], actor="admin-1"
    )
    assert created.tags == ["oom"]
    with pytest.raises(Conflict):
        await store.catalog.create_scenario(id="k8s-oom-1", ground_truth="", actor="admin-1")
    found = await store.catalog.get_scenario("k8s-oom-1")
    assert found is not None and found.ground_truth == "secret truth"
    assert await store.catalog.get_scenario("missing") is None
    control = await store.catalog.create_scenario(id="healthy", ground_truth="", actor="admin-1")
    assert control.ground_truth == ""
    outcome = await submit(
        store,
        new_submission(
            ground_truth="secret truth", ground_truth_source="scenario", scenario_id="k8s-oom-1"
        ),
    )
    assert outcome.submission.scenario_id == "k8s-oom-1"


async def test_rubric_versions_round_trip(store: Store) -> None:
    rubric = sregym_rubric()
    assert await store.catalog.get_rubric(rubric.id) is None
    await store.catalog.save_rubric(rubric)
    await store.catalog.save_rubric(rubric)  # idempotent
    assert await store.catalog.get_rubric(rubric.id) == rubric
    assert await store.catalog.get_rubric(rubric.id, rubric.version) == rubric
    assert await store.catalog.get_rubric(rubric.id, "v0+000000000000") is None
    changed = rubric.model_copy(update={"label": "v2", "title": "changed"})
    await store.catalog.save_rubric(changed)
    latest = await store.catalog.get_rubric(rubric.id)
    assert latest is not None and latest.version == changed.version
    versions = await store.catalog.list_rubric_versions(rubric.id)
    assert [v.version for v in versions] == [rubric.version, changed.version]


async def test_a_submission_saves_its_rubric_version(store: Store) -> None:
    await submit(store)
    assert await store.catalog.get_rubric("sregym-rca") == sregym_rubric()


def test_counting_a_tokens_attempts_reads_a_range_of_its_index(engine: Engine) -> None:
    # the count runs in the transaction that stores the next attempt (under SQLite's
    # write lock): it must not read every submission of the scenario or of the token
    if engine.dialect.name != "sqlite":
        pytest.skip("the plan is checked on SQLite")
    from storage.attempts import recent_query
    from storage.canonical import utcnow

    query = recent_query("tok-1", "hotel/user-port", utcnow())
    sql = str(query.compile(dialect=engine.dialect, compile_kwargs={"literal_binds": True}))
    with engine.connect() as connection:
        plan = [row[3] for row in connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]
    assert any(
        "ix_submission_attempts (submitted_by=? AND scenario_id=? AND created_at>?)" in step
        for step in plan
    ), plan
