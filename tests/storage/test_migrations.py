"""Migrations: an empty database upgrades to head and matches the models exactly."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

import storage.imports.tables
import storage.quality_tables
import storage.regrade.tables
import storage.review_tables
import storage.scenario_tables
import storage.tables
import storage.webhooks.tables  # noqa: F401  (the imports register every table)
from judge.calls import TokenLogprob
from storage import ChainKey, Store, current_revision, head_revision, make_engine, upgrade
from storage.search import include_in_autogenerate
from tests.support.keys import session_key

ROOT = Path(__file__).resolve().parents[2]


def _diff(connection: Connection) -> list[object]:
    # as storage/migrations/env.py: the search index is made by its migration, not the models
    opts = {"compare_type": True, "include_object": include_in_autogenerate}
    context = MigrationContext.configure(connection, opts=opts)
    return list(compare_metadata(context, SQLModel.metadata))


async def test_empty_database_upgrades_to_head_without_autogenerate_diff(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    try:
        assert await current_revision(engine) is None
        await upgrade(engine)
        assert await current_revision(engine) == head_revision()
        with engine.connect() as connection:
            assert _diff(connection) == []
    finally:
        engine.dispose()


async def test_upgrade_twice_is_harmless_and_accepts_a_url(database_url: str) -> None:
    await upgrade(database_url)
    await upgrade(database_url)
    assert await current_revision(database_url) == head_revision()


def test_there_is_one_head() -> None:
    from alembic.script import ScriptDirectory

    from storage.migrate import alembic_config

    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert heads == [head_revision()]


def _downgrade(connection: Connection, revision: str) -> None:
    from alembic import command

    from storage.migrate import alembic_config

    config = alembic_config()
    config.attributes["connection"] = connection
    command.downgrade(config, revision)


def _rows_after_downgrade(database_url: str, revision: str, query: str) -> list[Any]:
    """The rows of ``query`` once the database is downgraded to ``revision``."""
    from sqlalchemy import text
    from sqlalchemy.pool import NullPool

    old = make_engine(database_url, foreign_keys=False, poolclass=NullPool)
    try:
        with old.begin() as connection:
            _downgrade(connection, revision)
            return list(connection.execute(text(query)).all())
    finally:
        old.dispose()


async def test_0005_holds_existing_flagged_passes_and_hashes_ground_truths(
    database_url: str,
) -> None:
    """A database graded before holds existed: its flagged passes are held after upgrade."""
    from sqlalchemy import text
    from sqlalchemy.pool import NullPool

    from storage import Store
    from storage.canonical import sha256_hex
    from tests.storage.helpers import graded_result, new_submission, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    flagged = (await submit(store, new_submission("d1"))).grading.id
    clean = (await submit(store, new_submission("d2"))).grading.id
    await store.queue.claim_pending("w", limit=2, lease_seconds=60)
    result = graded_result()
    assert await store.queue.complete(
        flagged, "w", result.model_copy(update={"review_reasons": ("injection_suspected",)})
    )
    assert await store.queue.complete(clean, "w", result)
    engine.dispose()

    # back to 0004 (no held column), where that pass stood as a pass
    old = make_engine(database_url, foreign_keys=False, poolclass=NullPool)
    with old.begin() as connection:
        _downgrade(connection, "0004")
        connection.execute(text("UPDATE grading SET passed = :yes"), {"yes": True})
    old.dispose()
    await upgrade(database_url)

    engine = make_engine(database_url)
    with engine.connect() as connection:
        rows = {r.id: r for r in connection.execute(text("SELECT id, passed, held FROM grading"))}
        query = text("SELECT ground_truth, ground_truth_sha256 FROM submission")
        hashes = (connection.execute(query)).all()
    engine.dispose()
    assert (rows[flagged].passed, bool(rows[flagged].held)) == (None, True)
    assert (bool(rows[clean].passed), bool(rows[clean].held)) == (True, False)
    assert all(digest == sha256_hex(truth) for truth, digest in hashes)


async def test_0008_makes_existing_scenarios_submissions_and_gradings_version_1(
    database_url: str,
) -> None:
    """A database from before versions: every scenario's ground truth becomes its version
    1, and what was graded against a scenario names that version; inline ones none, nor
    one graded against another text than the scenario's (before versions, an SREGym
    import of a registered problem kept its problems file's ground truth): version 1 is
    a text it was never graded against."""
    from sqlalchemy import text
    from sqlalchemy.pool import NullPool

    from storage import Store
    from tests.storage.helpers import new_submission, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    await store.catalog.create_scenario(id="hotel/a", ground_truth="gt-a", actor="admin")
    by_scenario = new_submission(
        "d1", ground_truth="gt-a", ground_truth_source="scenario", scenario_id="hotel/a"
    )
    registered = await submit(store, by_scenario)
    inline = await submit(store, new_submission("d2"))
    other_text = new_submission(
        "d3", ground_truth="gt-b", ground_truth_source="scenario", scenario_id="hotel/a"
    )
    other = await submit(store, other_text)
    engine.dispose()

    old = make_engine(database_url, foreign_keys=False, poolclass=NullPool)
    with old.begin() as connection:
        _downgrade(connection, "0007")
    old.dispose()
    await upgrade(database_url)

    engine = make_engine(database_url)
    with engine.connect() as connection:
        versions = (
            connection.execute(
                text("SELECT scenario_id, version, ground_truth FROM scenario_version")
            )
        ).all()
        scenario = (connection.execute(text("SELECT version, scenario_set FROM scenario"))).one()
        graded = dict((connection.execute(text("SELECT id, scenario_version FROM grading"))).all())
        submitted = dict(
            (connection.execute(text("SELECT id, scenario_version FROM submission"))).all()
        )
    engine.dispose()
    assert versions == [("hotel/a", 1, "gt-a")]
    assert tuple(scenario) == (1, "default")
    assert graded == {registered.grading.id: 1, inline.grading.id: None, other.grading.id: None}
    assert submitted == {
        registered.submission.id: 1, inline.submission.id: None, other.submission.id: None
    }  # fmt: skip


async def test_0023_moves_every_vote_onto_its_grading_and_back(database_url: str) -> None:
    """Votes stored in their own table before 0023 are on their gradings after it, in the
    order cast and naming their calls, those of an unscored panel (no answers) included;
    a downgrade puts the same rows back."""
    from sqlalchemy import text

    from judge.verdict import Vote
    from storage import Store
    from tests.storage.helpers import graded_result, new_submission, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    voted, unscored, bare = [
        (await submit(store, new_submission(name))).grading.id for name in ("d1", "d2", "d3")
    ]
    await store.queue.claim_pending("w", limit=3, lease_seconds=60)
    result = graded_result(calls=2)
    votes = tuple(
        Vote(judge_spec=judge, question_id=a.question_id, answer=a.answer, call_index=index)
        for index, judge in enumerate(("openai:a", "openai:b"))
        for a in result.answers
    )
    assert await store.queue.complete(voted, "w", result.model_copy(update={"votes": votes}))
    one_member = result.model_copy(
        update={
            "status": "unscored",
            "unscored_reason": "judge_error",
            "answers": (),
            "outcome": None,
            "judge_outcome": None,
            "votes": votes[:9],
        }
    )
    assert await store.queue.complete(unscored, "w", one_member)
    assert await store.queue.complete(bare, "w", result)
    query = text("SELECT id, votes FROM grading")

    def gradings_votes() -> dict[str, object]:
        with engine.connect() as connection:
            rows = connection.execute(query).all()
        return {g: (json.loads(v) if isinstance(v, str) else v) for g, v in rows}

    before = gradings_votes()
    engine.dispose()
    assert before[bare] is None
    cast = before[voted]
    assert isinstance(cast, list) and len(cast) == 18
    assert [v["judge_spec"] for v in cast if v["question_id"] == "D1-Q1"] == [
        "openai:a",
        "openai:b",
    ]
    assert all(v["call_id"] for v in cast) and len({v["call_id"] for v in cast}) == 2
    assert isinstance(before[unscored], list) and len(before[unscored]) == 9

    rows = _rows_after_downgrade(
        database_url,
        "0022",
        "SELECT grading_id, question_id, judge_spec, call_id, answer FROM judge_vote",
    )
    assert len(rows) == 27 and {r.grading_id for r in rows} == {voted, unscored}
    assert sorted((r.grading_id, r.question_id, r.judge_spec, r.call_id) for r in rows) == sorted(
        (g, v["question_id"], v["judge_spec"], v["call_id"])
        for g, listed in before.items()
        for v in listed or ()  # type: ignore[attr-defined]
    )

    await upgrade(database_url)
    engine = make_engine(database_url)
    assert gradings_votes() == before
    engine.dispose()


async def test_0025_a_downgrade_keeps_the_cache_entries_the_calls_held(database_url: str) -> None:
    """Judge cache entries kept on judge calls (0025) are copied into ``judge_cache`` by a
    downgrade, the oldest call's reply under a key; the older version reuses them."""

    from storage import Store
    from tests.storage.helpers import graded_result, judge_call, new_submission, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    ids = [(await submit(store, new_submission(name))).grading.id for name in ("d1", "d2", "d3")]
    await store.queue.claim_pending("w", limit=3, lease_seconds=60)
    for grading_id, key, reply in zip(
        ids, ("k1", "k1", None), ("first", "second", "unkept"), strict=True
    ):
        call = judge_call()
        assert call.completion is not None
        kept = call.model_copy(
            update={
                "cache_key": key,
                "completion": call.completion.model_copy(update={"text": reply}),
            }
        )
        result = graded_result().model_copy(update={"calls": (kept,)})
        assert await store.queue.complete(grading_id, "w", result)
    engine.dispose()

    query = "SELECT key, completion_text, response_model FROM judge_cache"
    rows = _rows_after_downgrade(database_url, "0024", query)
    assert [tuple(r) for r in rows] == [("k1", "first", "judge-model-2025")]
    await upgrade(database_url)


async def test_0029_leaves_copies_carried_before_as_audited_and_their_withdrawal_works(
    database_url: str, monkeypatch: pytest.MonkeyPatch, service_key: Any
) -> None:
    """A copy a regrade carried before 0029 names its original only in its reason. The
    upgrade writes nothing into it (its audited digest has no such column: writing one
    made an untouched database fail ``audit verify``), and withdrawing it still takes
    back the label its original recorded, found from the reason."""
    from sqlalchemy import text

    from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
    from api.regrade.selection import RegradeFilter
    from storage import Store, verify_chain
    from storage.regrade import carry
    from tests.storage.helpers import graded_result, override, sregym_rubric, submit

    copy = carry._copy

    def old_copy(*args: Any) -> Any:  # as the code before 0029 made them
        record = copy(*args)
        record.carried_from = None
        return record

    monkeypatch.setattr(carry, "_copy", old_copy)
    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=service_key)
    first = (await submit(store)).grading.id
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(first, "w", graded_result())
    made, _ = await override(
        store, first, rubric=sregym_rubric(), expected_revision=2, kind="verdict",
        reason="wrong fault", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    spec = "openai:new@http://127.0.0.1:9/v1"
    target = RegradeTarget(sregym_rubric(), spec, "openai", "new", "promote")
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result())
    engine.dispose()

    _rows_after_downgrade(database_url, "0028", "SELECT 1")
    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=service_key)
    assert (await verify_chain(engine, key=store.db.chain_key)).ok
    with engine.connect() as connection:
        query = text("SELECT id, carried_from FROM override WHERE grading_id = :g")
        [(copied, linked)] = connection.execute(query, {"g": item.grading_id}).all()
    assert linked is None
    view = await store.gradings.get(item.grading_id)
    assert view is not None
    await override(
        store, item.grading_id, rubric=sregym_rubric(), expected_revision=view.grading.revision,
        kind="withdraw", withdraws=copied, reason="I was wrong", author_id="h1",
        author_name="Hana",
    )  # fmt: skip
    with engine.connect() as connection:
        query = text("SELECT verdict FROM human_label WHERE grading_id = :g ORDER BY id")
        labels = [row[0] for row in connection.execute(query, {"g": first})]
    assert labels == ["fail", None]  # Hana's, then its retraction
    assert (await verify_chain(engine, key=store.db.chain_key)).ok
    engine.dispose()
    del made


#: a process that migrates ``argv[1]`` at the instant ``argv[2]`` (epoch seconds)
_MIGRATE_AT = """
import sys, time
from storage.migrate import migrate_to
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
migrate_to(sys.argv[1])
"""


@pytest.mark.slow
@pytest.mark.postgres
def test_two_processes_migrating_one_new_database_at_once_both_succeed(database_url: str) -> None:
    """Replicas started together each migrate on start: one of them failed on the other's
    half-made schema (PostgreSQL's catalogue refused a type made twice) and did not start.
    A migration now waits for another one in progress, then finds the schema made.
    (SQLite is one machine's file: two processes creating it at the same instant can
    still collide on switching the new file to WAL.)"""
    if not database_url.startswith("postgresql"):
        pytest.skip("replicas share PostgreSQL")
    start = time.time() + 3  # both have imported the project by then
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", _MIGRATE_AT, database_url, str(start)]
    processes = [
        subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    errors = [process.communicate(timeout=120)[1] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], errors
    assert asyncio.run(current_revision(database_url)) == head_revision()


async def test_0031_keeps_the_original_rows_and_a_downgrade_keeps_one_per_submission(
    database_url: str, tmp_path: Path
) -> None:
    """0031 keeps SREGym's original rows one per file and line: rows stored before stay
    valid; a downgrade keeps each submission's first row (by file, then line)."""
    from api.imports.queries import ImportQueries
    from api.imports.sregym import read_sregym_folder
    from storage import Store
    from tests.storage.helpers import sregym_rubric
    from tests.support.sregym_driver import IDS, diagnosed, write_run

    problem = "k8s_target_port-misconfig-detection-1"
    write_run(tmp_path, "stratus", {problem: [diagnosed("port 9999", set(IDS))]})
    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    queries = ImportQueries(store.db, store.catalog)
    await queries.sregym(read_sregym_folder(tmp_path), {problem: "port"}, rubric=sregym_rubric())
    engine.dispose()

    query = "SELECT path FROM sregym_original_row ORDER BY path, line"
    [kept] = _rows_after_downgrade(database_url, "0030", query)
    assert kept.path == f"0601_1200/stratus/{problem}/{problem}_stratus_results.csv"
    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    again = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(tmp_path), {problem: "port"}, rubric=sregym_rubric()
    )
    with engine.connect() as connection:
        from sqlalchemy import text

        paths = connection.execute(text(query)).scalars().all()
    engine.dispose()
    assert (again.submissions, again.already_imported) == (0, 3)
    assert len(paths) == 3 and kept.path in paths


async def test_0034_starts_the_give_up_clock_of_deliveries_tried_before_at_their_first_attempt(
    database_url: str,
) -> None:
    """A webhook delivery tried before 0034 is given up counting from the first attempt of
    its current series (those since its ``created_at``, which a redelivery set), or from
    ``created_at`` while its first attempt is in flight; one never tried starts its clock
    when it is first tried. A downgrade keeps the deliveries."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import insert, select
    from sqlalchemy.pool import NullPool
    from sqlmodel import col

    from storage.webhooks.tables import (
        WebhookAttemptRecord,
        WebhookDeliveryRecord,
        WebhookEndpointRecord,
    )

    def at(seconds: int) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds)

    await upgrade(database_url)
    old = make_engine(database_url, foreign_keys=False, poolclass=NullPool)
    with old.begin() as connection:
        _downgrade(connection, "0033")
        connection.execute(
            insert(WebhookEndpointRecord.__table__),  # type: ignore[attr-defined]
            [{"id": "e1", "url": "https://hooks.example/h", "events": ["regrade.finished"],
              "description": "", "secret": "whsec_x", "active": True, "created_by": "t",
              "created_at": at(0), "consecutive_failures": 0}],
        )  # fmt: skip
        deliveries = [
            # tried at 1 s, redelivered at 10 s, tried again at 12 s and 13 s
            {"seq": 1, "attempts": 2, "created_at": at(10)},
            {"seq": 2, "attempts": 1, "created_at": at(20)},  # its first send in flight
            {"seq": 3, "attempts": 0, "created_at": at(30)},  # never tried
        ]
        connection.execute(
            insert(WebhookDeliveryRecord.__table__),  # type: ignore[attr-defined]
            [{**d, "id": f"msg_{d['seq']}", "endpoint_id": "e1", "event": "regrade.finished",
              "payload": {}, "state": "pending", "next_attempt_at": at(40)}
             for d in deliveries],
        )  # fmt: skip
        connection.execute(
            insert(WebhookAttemptRecord.__table__),  # type: ignore[attr-defined]
            [{"delivery_seq": 1, "attempted_at": at(s), "status": 500, "duration_ms": 1.0}
             for s in (1, 13, 12)],
        )  # fmt: skip
    old.dispose()

    await upgrade(database_url)
    engine = make_engine(database_url)
    query = select(col(WebhookDeliveryRecord.seq), col(WebhookDeliveryRecord.first_attempt_at))
    with engine.connect() as connection:
        first = {seq: when for seq, when in connection.execute(query).all()}
    engine.dispose()
    assert first == {1: at(12), 2: at(20), 3: None}
    kept = _rows_after_downgrade(database_url, "0033", "SELECT seq FROM webhook_delivery")
    assert sorted(seq for (seq,) in kept) == [1, 2, 3]
    await upgrade(database_url)


async def test_0035_keeps_events_naming_a_long_judge_and_a_downgrade_refuses_to_cut_them(
    database_url: str,
) -> None:
    """After 0035 an audit event names a judge of a 256-character model (``judge.changed``
    here), on PostgreSQL too; a downgrade to a log that cannot hold the name is refused
    and leaves the database as it was (the audit chain covers the name: it is not cut)."""
    from storage import Store

    judge = "openai:" + "m" * 256
    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    await store.judge_digests.learn(judge, "models:sha256:aaa", actor="service")
    changed = await store.judge_digests.learn(judge, "models:sha256:bbb", actor="service")
    engine.dispose()
    assert changed is not None and changed.changed

    with pytest.raises(RuntimeError, match="1 of its events name an entity longer than 160"):
        _rows_after_downgrade(database_url, "0034", "SELECT 1")
    assert await current_revision(database_url) == head_revision()


async def test_0036_lists_existing_gradings_at_their_creation_time(database_url: str) -> None:
    """Gradings stored before 0036 are listed where they were (newest first by creation
    time): their list position is their ``created_at``, and their audit digests are
    unchanged (the chain still verifies). The queue's claim-order index (on an
    expression, which SQLite's table rebuild does not keep by itself) is still there,
    beside the list's (0038). A downgrade keeps the gradings."""
    from sqlalchemy import text

    from storage import ChainKey, Store, verify_chain
    from tests.storage.helpers import new_submission, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    made = [(await submit(store, new_submission(f"d{n}"))).grading.id for n in range(3)]
    engine.dispose()
    kept = _rows_after_downgrade(database_url, "0035", "SELECT id FROM grading")
    assert sorted(g for (g,) in kept) == sorted(made)

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT created_at, listed_at FROM grading")).all()
        names = _grading_indexes(connection)
    listed, _ = await store.gradings.page(limit=10)
    report = await verify_chain(engine, key=ChainKey.of(session_key()))
    engine.dispose()
    assert len(rows) == 3 and all(created == at for created, at in rows)
    assert {"ix_grading_claim_order", "ix_grading_list_order"} <= names
    assert [v.grading.id for v in listed] == made[::-1]
    assert report.ok, report


def _grading_indexes(connection: Connection) -> set[str]:
    """The names of the ``grading`` table's indexes."""
    from sqlalchemy import text

    indexes = (
        "SELECT name FROM sqlite_master WHERE tbl_name = 'grading'"
        if connection.dialect.name == "sqlite"
        else "SELECT indexname FROM pg_indexes WHERE tablename = 'grading'"
    )
    return set(connection.execute(text(indexes)).scalars())


async def test_0038_indexes_the_list_in_its_order_and_a_downgrade_restores_the_index_before(
    database_url: str,
) -> None:
    """After 0038 the list of gradings has one index, in its order (``listed_at``, then
    the submission, then the grading); a downgrade to 0037 gives back the index on
    ``(listed_at, id)`` and keeps the gradings; upgrading again lists them as before."""
    from storage import Store
    from tests.storage.helpers import new_submission, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=session_key())
    made = [(await submit(store, new_submission(f"d{n}"))).grading.id for n in range(3)]
    with engine.connect() as connection:
        at_head = _grading_indexes(connection)
    engine.dispose()
    assert "ix_grading_list_order" in at_head and "ix_grading_listed_at_id" not in at_head
    kept = _rows_after_downgrade(
        database_url,
        "0037",
        "SELECT COUNT(*) FROM grading WHERE listed_at IS NOT NULL",
    )
    assert kept == [(3,)]
    engine = make_engine(database_url)
    with engine.connect() as connection:
        before = _grading_indexes(connection)
    engine.dispose()
    assert "ix_grading_listed_at_id" in before and "ix_grading_list_order" not in before

    await upgrade(database_url)
    engine = make_engine(database_url)
    listed, _ = await Store(engine, key=session_key()).gradings.page(limit=10)
    engine.dispose()
    assert [v.grading.id for v in listed] == made[::-1]


async def _downgrade_refused_and_chain_kept(
    database_url: str, service_key: Any, engine: Any, revision: str
) -> None:
    """The audit chain verifies; a downgrade to ``revision`` is refused, naming what the
    audit log covers; the database stays at head and its chain still verifies."""
    from storage import verify_chain

    assert (await verify_chain(engine, key=ChainKey.of(service_key))).ok
    engine.dispose()
    with pytest.raises(RuntimeError, match="the audit log covers"):
        _rows_after_downgrade(database_url, revision, "SELECT 1")
    assert await current_revision(database_url) == head_revision()
    engine = make_engine(database_url)
    report = await verify_chain(engine, key=ChainKey.of(service_key))
    engine.dispose()
    assert report.ok, report.state_problems


async def test_0029_downgrade_refuses_to_cut_a_carried_overrides_origin(
    database_url: str, service_key: Any
) -> None:
    """A downgrade to 0028 is refused while a regrade's carried override names its
    origin (``carried_from``, covered by the audit chain), and the database stays as it
    was: ``audit verify`` still passes."""
    from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
    from api.regrade.selection import RegradeFilter
    from tests.storage.helpers import graded_result, override, sregym_rubric, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=service_key)
    first = (await submit(store)).grading.id
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(first, "w", graded_result())
    await override(
        store, first, rubric=sregym_rubric(), expected_revision=2, kind="verdict",
        reason="wrong fault", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    target = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "promote"
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result())
    await _downgrade_refused_and_chain_kept(database_url, service_key, engine, "0028")


async def test_0021_downgrade_refuses_to_cut_a_gradings_judge_digest(
    database_url: str, service_key: Any
) -> None:
    """A downgrade to 0020 is refused while a grading records its judge's model digest
    (``judge_digest``, inside the grading's audited state), and the database stays as it
    was: ``audit verify`` still passes."""
    from storage.models import FinishedGrading
    from tests.storage.helpers import graded_result, submit

    await upgrade(database_url)
    engine = make_engine(database_url)
    store = Store(engine, key=service_key)
    grading = (await submit(store)).grading.id
    await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    finished = FinishedGrading(grading, "w", graded_result(), judge_digest="models:sha256:aaa")
    assert await store.queue.complete_many([finished]) == [True]
    await _downgrade_refused_and_chain_kept(database_url, service_key, engine, "0020")


async def test_0037_keeps_older_calls_digests_and_a_downgrade_refuses_to_cut_logprobs(
    database_url: str, service_key: Any
) -> None:
    """Judge calls stored without log-probabilities go through 0037 and back with their
    audit digests unchanged and their cache entries found. Once a cache entry keeps its
    reply's log-probabilities (which the audit log covers), a downgrade to 0036 is
    refused and the database stays as it was: ``audit verify`` still passes."""
    from storage import verify_chain
    from tests.storage.helpers import graded_result, judge_call, submit

    async def graded_once(store: Store, key: str, run: str, logprobs: Any) -> None:
        grading = (await submit(store, idempotency_key=run)).grading.id
        await store.queue.claim_pending("w", limit=1, lease_seconds=60)
        call = judge_call()
        assert call.completion is not None
        completion = call.completion.model_copy(update={"logprobs": logprobs})
        call = call.model_copy(update={"completion": completion, "cache_key": key})
        result = graded_result().model_copy(update={"calls": (call,)})
        assert await store.queue.complete(grading, "w", result)

    await upgrade(database_url)
    engine = make_engine(database_url)
    await graded_once(Store(engine, key=service_key), "key-old", "r1", None)
    engine.dispose()
    assert _rows_after_downgrade(database_url, "0036", "SELECT cache_key FROM judge_call") == [
        ("key-old",)
    ]

    await upgrade(database_url)
    engine = make_engine(database_url)
    assert (await verify_chain(engine, key=ChainKey.of(service_key))).ok
    assert list(await Store(engine, key=service_key).cache.get_many(["key-old"])) == ["key-old"]
    tokens = (
        TokenLogprob(token='{"answer": "', logprob=0.0),
        TokenLogprob(token="yes", logprob=-0.1),
    )
    await graded_once(Store(engine, key=service_key), "key-new", "r2", tokens)
    engine.dispose()
    with pytest.raises(RuntimeError, match="the audit log covers"):
        _rows_after_downgrade(database_url, "0036", "SELECT 1")

    assert await current_revision(database_url) == head_revision()
    engine = make_engine(database_url)
    report = await verify_chain(engine, key=ChainKey.of(service_key))
    engine.dispose()
    assert report.ok, report


async def test_0039_keeps_the_rubric_jobs_name_and_a_downgrade_refuses_a_job_naming_none(
    database_url: str, service_key: Any
) -> None:
    """A regrade job that names its rubric goes through 0039 and back with it. Once a job
    names none (each item kept its submission's rubric), a downgrade to 0038, whose jobs
    all name one, is refused and the database stays at head."""
    import dataclasses

    from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
    from api.regrade.selection import RegradeFilter
    from tests.storage.helpers import sregym_rubric

    async def job(target: RegradeTarget) -> None:
        engine = make_engine(database_url)
        queries = RegradeJobQueries(Store(engine, key=service_key).db)
        await queries.create_job(RegradeFilter(), target, actor="admin")
        engine.dispose()

    named = RegradeTarget(
        sregym_rubric(), "openai:new@http://127.0.0.1:9/v1", "openai", "new", "shadow"
    )
    await upgrade(database_url)
    await job(named)
    rows = _rows_after_downgrade(database_url, "0038", "SELECT rubric_id FROM regrade_job")
    assert rows == [("sregym-rca",)]

    await upgrade(database_url)
    await job(dataclasses.replace(named, rubric=None))
    with pytest.raises(RuntimeError, match="1 of them name no rubric"):
        _rows_after_downgrade(database_url, "0038", "SELECT 1")
    assert await current_revision(database_url) == head_revision()
