"""Every evidentiary record is in the chain: an edit or deletion of any of them is named.

Someone who can write the database but does not hold the service key edits or deletes
one row of a submission, a scenario or one of its ground-truth versions, an override
or its withdrawal, a human label, a failure tag, or a judge call; ``verify_chain``
names the table, the row and (for an edit) the columns. Also: a row written around the
log, the log rewritten wholesale in the unkeyed form with a verdict flipped, and the
log rolled back behind its newest checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import delete, insert, select, update

from api.adjudication.label_queries import LabelQueries
from api.adjudication.tag_queries import TagQueries
from storage import Store, check_checkpoint, make_checkpoint
from storage.audit import COVERED_TABLES
from storage.audit.backfill import backfill
from storage.scenarios import ScenarioSpec
from tests.storage.audit_helpers import AUDIT, GRADINGS, execute, rehash_from, rows, verify
from tests.storage.helpers import graded_result, new_submission, override, sregym_rubric, submit

pytestmark = pytest.mark.tampers

SUBMISSIONS = COVERED_TABLES["submission"]
SCENARIOS = COVERED_TABLES["scenario"]
VERSIONS = COVERED_TABLES["scenario_version"]
OVERRIDES = COVERED_TABLES["override"]
LABELS = COVERED_TABLES["human_label"]
TAGS = COVERED_TABLES["failure_tag"]
CALLS = COVERED_TABLES["judge_call"]


@dataclass
class Evidence:
    """The ids of one of each record kind, written through the store."""

    scenario: str
    graded: str  # a grading of a submission against the scenario
    submission: str
    inline_submission: str
    pending_grading: str
    pending_submission: str
    verdict_override: str
    answer_override: str
    withdrawal: str
    blind_label: int
    tag: int
    removed_tag: int
    call: str
    #: a time after every row written
    after: datetime


async def evidence(store: Store) -> Evidence:
    """A scenario with two versions, graded submissions, overrides and a withdrawal,
    blind labels, failure tags (one removed), judge calls: every record kind."""
    spec = ScenarioSpec("shop/oom", "[fault_spec] component=deployment/checkout || OOM")
    await store.scenarios.create(spec, actor="admin")
    change = await store.scenarios.update(
        ScenarioSpec(spec.id, spec.ground_truth + " (v2)", title="OOM", note="typo"),
        expected_revision=1,
        actor="admin",
    )
    scenario_data = new_submission(
        ground_truth=change.scenario.ground_truth,
        ground_truth_source="scenario",
        scenario_id=spec.id,
        scenario_version=2,
    )
    scenario_sub = await submit(store, scenario_data)
    inline_sub = await submit(store)
    pending = await submit(store, new_submission("still waiting"))
    await store.queue.claim_pending("w", limit=2, lease_seconds=60)
    graded, other = scenario_sub.grading.id, inline_sub.grading.id
    for grading_id in (graded, other):
        await store.queue.complete(grading_id, "w", graded_result(["D1-Q1"]))
    common: dict[str, Any] = {"rubric": sregym_rubric(), "author_id": "adj", "author_name": "Ada"}
    verdict, _ = await override(
        store,
        graded,
        expected_revision=2,
        kind="verdict",
        verdict="pass",
        reason="read it",
        **common,
    )
    answer, _ = await override(
        store,
        other,
        expected_revision=2,
        kind="answer",
        question_id="D1-Q2",
        answer=True,
        reason="it says so",
        **common,
    )
    withdrawal, _ = await override(
        store,
        other,
        expected_revision=3,
        kind="withdraw",
        withdraws=answer.id,
        reason="no",
        **common,
    )
    labels = await LabelQueries(store.db).add(
        graded,
        question_ids=[q.id for q in sregym_rubric().questions],
        answers={"D1-Q1": True},
        verdict="pass",
        author_id="bob",
        author_name="Bob",
    )
    await TagQueries(store.db).add_vocabulary(
        "wrong-pod", description="named another pod", actor="admin"
    )
    tag = await TagQueries(store.db).add(
        graded, tag="wrong-pod", note="it blamed cart", author_id="adj", author_name="Ada"
    )
    removed = await TagQueries(store.db).add(
        other, tag="wrong-pod", note="", author_id="adj", author_name="Ada"
    )
    await TagQueries(store.db).remove(other, removed.id or 0, actor="adj")
    calls = await store.gradings.judge_calls(graded)
    assert labels[0].id is not None and tag.id is not None and removed.id is not None
    return Evidence(
        scenario=spec.id,
        graded=graded,
        submission=scenario_sub.submission.id,
        inline_submission=inline_sub.submission.id,
        pending_grading=pending.grading.id,
        pending_submission=pending.submission.id,
        verdict_override=verdict.id,
        answer_override=answer.id,
        withdrawal=withdrawal.id,
        blind_label=labels[0].id,
        tag=tag.id,
        removed_tag=removed.id,
        call=calls[0].id,
        after=store.db.clock(),
    )


def edit(table: Any, key: Callable[[Evidence], Any], **values: Any) -> Callable[[Evidence], Any]:
    """An UPDATE of one row by its id."""
    return lambda e: update(table).where(table.c.id == key(e)).values(**values)


def remove(table: Any, key: Callable[[Evidence], Any]) -> Callable[[Evidence], Any]:
    """A DELETE of one row by its id."""
    return lambda e: delete(table).where(table.c.id == key(e))


def version_row(number: int) -> Any:
    """The scenario's ground-truth version ``number``."""
    return (VERSIONS.c.scenario_id == "shop/oom") & (VERSIONS.c.version == number)


#: (kind, statements, the problem verify must report: table, row key, what)
KINDS: list[tuple[str, Callable[[Evidence], list[Any]], Callable[[Evidence], str]]] = [
    (
        "submission diagnosis edited",
        lambda e: [edit(SUBMISSIONS, lambda e: e.submission, diagnosis="the pod OOMs")(e)],
        lambda e: f"submission {e.submission} differs in diagnosis",
    ),
    (
        "submission metadata edited",
        lambda e: [edit(SUBMISSIONS, lambda e: e.submission, metadata={"harness": "x"})(e)],
        lambda e: f"submission {e.submission} differs in metadata",
    ),
    (
        "submission agent and model edited",
        lambda e: [edit(SUBMISSIONS, lambda e: e.submission, agent="b", model="y")(e)],
        lambda e: f"submission {e.submission} differs in agent, model",
    ),
    (
        "submission ground truth edited",
        lambda e: [edit(SUBMISSIONS, lambda e: e.inline_submission, ground_truth="x")(e)],
        lambda e: f"submission {e.inline_submission} differs in ground_truth",
    ),
    (
        "submission deleted (with its pending grading)",
        lambda e: [
            delete(GRADINGS).where(GRADINGS.c.id == e.pending_grading),
            remove(SUBMISSIONS, lambda e: e.pending_submission)(e),
        ],
        lambda e: f"submission {e.pending_submission} is in the audit log but missing",
    ),
    (
        "scenario ground truth edited",
        lambda e: [edit(SCENARIOS, lambda e: e.scenario, ground_truth="x")(e)],
        lambda e: "scenario shop/oom differs in ground_truth",
    ),
    (
        "scenario title and tags edited",
        lambda e: [edit(SCENARIOS, lambda e: e.scenario, title="t", tags=["x"])(e)],
        lambda e: "scenario shop/oom differs in tags, title",
    ),
    (
        "scenario version number rolled back",
        lambda e: [edit(SCENARIOS, lambda e: e.scenario, version=1)(e)],
        lambda e: "scenario shop/oom differs in version",
    ),
    (
        "first ground-truth version edited",
        lambda e: [update(VERSIONS).where(version_row(1)).values(ground_truth="x")],
        lambda e: "scenario_version shop/oom@1 differs in ground_truth",
    ),
    (
        "newest ground-truth version's note edited",
        lambda e: [update(VERSIONS).where(version_row(2)).values(note="")],
        lambda e: "scenario_version shop/oom@2 differs in note",
    ),
    (
        "ground-truth version deleted",
        lambda e: [delete(VERSIONS).where(version_row(2))],
        lambda e: "scenario_version shop/oom@2 is in the audit log but missing",
    ),
    (
        "override reason and author rewritten",
        lambda e: [
            edit(OVERRIDES, lambda e: e.verdict_override, author_name="admin", reason="x")(e)
        ],
        lambda e: f"override {e.verdict_override} differs in author_name, reason",
    ),
    (
        "override verdict flipped",
        lambda e: [edit(OVERRIDES, lambda e: e.verdict_override, verdict="fail")(e)],
        lambda e: f"override {e.verdict_override} differs in verdict",
    ),
    (
        "override deleted while its verdict stays",
        lambda e: [remove(OVERRIDES, lambda e: e.verdict_override)(e)],
        lambda e: f"override {e.verdict_override} is in the audit log but missing",
    ),
    (
        "answer override's answer flipped",
        lambda e: [edit(OVERRIDES, lambda e: e.answer_override, answer=False)(e)],
        lambda e: f"override {e.answer_override} differs in answer",
    ),
    (
        "withdrawal pointed elsewhere",
        lambda e: [edit(OVERRIDES, lambda e: e.withdrawal, withdraws=e.verdict_override)(e)],
        lambda e: f"override {e.withdrawal} differs in withdraws",
    ),
    (
        "withdrawal deleted",
        lambda e: [remove(OVERRIDES, lambda e: e.withdrawal)(e)],
        lambda e: f"override {e.withdrawal} is in the audit log but missing",
    ),
    (
        "override written around the log",
        lambda e: [
            insert(OVERRIDES).values(
                id="f" * 32,
                grading_id=e.graded,
                kind="verdict",
                verdict="fail",
                reason="x",
                author_id="adj",
                author_name="Ada",
                created_at=e.after,
            )
        ],
        lambda e: f"override {'f' * 32} has no state in the audit log",
    ),
    (
        "blind label's answer flipped",
        lambda e: [edit(LABELS, lambda e: e.blind_label, answer=False)(e)],
        lambda e: f"human_label {e.blind_label} differs in answer",
    ),
    (
        "label's author rewritten",
        lambda e: [edit(LABELS, lambda e: e.blind_label, author_id="x", author_name="x")(e)],
        lambda e: f"human_label {e.blind_label} differs in author_id, author_name",
    ),
    (
        "label deleted",
        lambda e: [remove(LABELS, lambda e: e.blind_label)(e)],
        lambda e: f"human_label {e.blind_label} is in the audit log but missing",
    ),
    (
        "tag note edited",
        lambda e: [edit(TAGS, lambda e: e.tag, note="it blamed nothing")(e)],
        lambda e: f"failure_tag {e.tag} differs in note",
    ),
    (
        "tag's author rewritten",
        lambda e: [edit(TAGS, lambda e: e.tag, author_name="x")(e)],
        lambda e: f"failure_tag {e.tag} differs in author_name",
    ),
    (
        "removed tag put back",
        lambda e: [edit(TAGS, lambda e: e.removed_tag, removed_at=None, removed_by=None)(e)],
        lambda e: f"failure_tag {e.removed_tag} differs in removed_at, removed_by",
    ),
    (
        "tag deleted",
        lambda e: [remove(TAGS, lambda e: e.tag)(e)],
        lambda e: f"failure_tag {e.tag} is in the audit log but missing",
    ),
    (
        "judge call's reply edited",
        lambda e: [edit(CALLS, lambda e: e.call, response_text='[{"id": "D1-Q1"}]')(e)],
        lambda e: f"judge_call {e.call} differs in response_text",
    ),
    (
        "judge call's prompt edited",
        lambda e: [edit(CALLS, lambda e: e.call, messages=[{"role": "user", "content": "x"}])(e)],
        lambda e: f"judge_call {e.call} differs in messages",
    ),
    (
        "judge call's parameters edited",
        lambda e: [edit(CALLS, lambda e: e.call, params={"temperature": 1.0})(e)],
        lambda e: f"judge_call {e.call} differs in params",
    ),
    (
        "judge call deleted",
        lambda e: [remove(CALLS, lambda e: e.call)(e)],
        lambda e: f"judge_call {e.call} is in the audit log but missing",
    ),
]


@pytest.mark.parametrize(
    ("statements", "expected"),
    [pytest.param(s, x, id=kind) for kind, s, x in KINDS],
)
async def test_a_tampered_record_is_named(
    store: Store,
    statements: Callable[[Evidence], list[Any]],
    expected: Callable[[Evidence], str],
) -> None:
    found = await evidence(store)
    assert (await verify(store)).ok
    await execute(store.engine, *statements(found))
    report = await verify(store)
    assert not report.ok and report.first_broken_seq is None, report
    assert any(p.startswith(expected(found)) for p in report.state_problems), (
        expected(found),
        report.state_problems,
    )


async def test_the_evidence_verifies_with_every_record_covered(store: Store) -> None:
    await evidence(store)
    report = await verify(store)
    assert report.ok, report
    assert report.records_uncovered == 0 and report.gradings_uncovered == 0
    with store.engine.connect() as connection:
        counts = {
            name: len((connection.execute(select(table))).all())
            for name, table in COVERED_TABLES.items()
        }
    assert all(counts.values()), counts
    assert report.records_checked == sum(counts.values())


async def test_the_log_rewritten_unkeyed_with_a_verdict_flipped(store: Store) -> None:
    """The whole log rewritten in the legacy form, its digests stripped, one grading's
    verdict flipped: no keyed row adopts the legacy rows, and nothing is covered."""
    found = await evidence(store)
    await execute(
        store.engine,
        *(
            update(AUDIT)
            .where(AUDIT.c.seq == row.seq)
            .values(payload={k: v for k, v in row.payload.items() if k not in ("covers", "rows")})
            for row in await rows(store.engine)
        ),
        update(GRADINGS).where(GRADINGS.c.id == found.graded).values(passed=False),
    )
    await rehash_from(store.engine, 1, None)
    report = await verify(store)
    assert not report.ok and report.first_broken_seq is None
    assert report.legacy_rows == len(await rows(store.engine)) and not report.legacy_adopted
    assert "legacy rows (unkeyed) and no keyed backfill adopting them" in report.state_problems[0]


async def test_the_log_rolled_back_behind_its_newest_checkpoint(store: Store) -> None:
    """Everything after a point deleted, records and their audit rows alike (a restored
    backup): the log is shorter than its newest checkpoint."""
    await evidence(store)
    before = (await rows(store.engine))[-1].seq
    await store.tokens.create(name="later", role="submitter")
    made = await make_checkpoint(store.engine, store.db.key, at=store.db.clock())
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq > before))
    assert (await verify(store)).ok  # nothing left in the tables tells: only the checkpoint
    problem = await check_checkpoint(store.engine, store.db.key, made)
    assert problem is not None and "deleted back past the checkpoint" in problem


async def test_a_backfill_adopts_records_written_before_coverage(store: Store) -> None:
    """An upgraded database: records without digests fail verify until backfilled."""
    found = await evidence(store)
    await execute(
        store.engine,
        *(
            update(AUDIT)
            .where(AUDIT.c.seq == row.seq)
            .values(payload={k: v for k, v in row.payload.items() if k != "rows"})
            for row in await rows(store.engine)
        ),
    )
    await rehash_from(store.engine, 1, store.db.chain_key)
    report = await verify(store)
    assert not report.ok and report.records_checked == 0
    assert report.records_uncovered >= len(COVERED_TABLES)
    assert "records written before the audit log covered them" in report.state_problems[0]
    done = await backfill(store.db)
    assert done.records == report.records_uncovered and done.legacy_rows == 0
    assert (await verify(store)).ok
    # from now on they are covered like any other row
    await execute(store.engine, edit(TAGS, lambda e: e.tag, note="x")(found))
    report = await verify(store)
    assert report.state_problems == (
        f"failure_tag {found.tag} differs in note from its newest state in the audit log "
        "(the row was edited, or the newest audit rows deleted)",
    )
