"""Review rows change one transaction after another per grading, on every engine: of two
claims at once one holds the item and the other sees it held; one human labelling twice
at once stores one set of labels; a label never closes the review of a grading an
override has just made a held pass; a withdrawal waits for a claim on the grading a
regrade carried the override to; a release never gives back a claim another adjudicator
has just made, and one at the moment its holder labels the grading lets both succeed; of
two admins defining one failure tag at once, one defines it and the other is told it
exists."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from api.adjudication.label_queries import LabelQueries
from api.adjudication.review_queries import ReviewQueries
from api.adjudication.tag_queries import TagQueries
from api.adjudication.use_cases import label_grading
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.service.principal import Principal
from storage import FinishedGrading, Store
from storage.errors import Conflict
from storage.review_tables import HumanLabelRecord, ReviewClaimRecord
from tests.conftest import Clock
from tests.storage.helpers import graded_result, override, sregym_rubric, submit
from tests.support.lock_waits import race_at_audit
from tests.support.submissions import IDS

#: six yes, one in each dimension at least: a fail that one more yes turns into a pass
SIX = [q for q in IDS if not q.endswith("Q3")]

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def _graded(store: Store) -> str:
    outcome = await submit(store)
    [claim] = await store.queue.claim_pending("seed", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "seed", graded_result(IDS[:7]))
    return outcome.grading.id


async def _outcomes(*calls: Any) -> list[str]:
    """``ok`` or the exception's class name of each call, run at once."""
    results = await asyncio.gather(*calls, return_exceptions=True)
    return sorted("ok" if not isinstance(r, BaseException) else type(r).__name__ for r in results)


@pytest.mark.parametrize("row", ["skipped before", "first claim"])
async def test_of_two_claims_at_once_one_holds_the_item_and_the_other_sees_it_held(
    store: Store, monkeypatch: pytest.MonkeyPatch, row: str
) -> None:
    """Both claims read the item's review row (or its absence) before either writes, as
    two requests on two connections can: before, both held it on PostgreSQL (or one
    failed on the row made twice)."""
    grading_id = await _graded(store)
    reviews = ReviewQueries(store.db)
    if row == "skipped before":
        await reviews.skip(grading_id, principal_id="a", principal_name="alice", note=None)
    barrier, armed = threading.Barrier(2, timeout=1), {"on": True}
    original = Session.get

    def get(self: Session, entity: Any, ident: Any, **kw: Any) -> Any:
        found = original(self, entity, ident, **kw)
        if entity is ReviewClaimRecord and armed["on"]:
            # where the claims would wait for each other; with the grading locked first
            # (or SQLite's one writer) the second never gets here while the first waits
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return found

    monkeypatch.setattr(Session, "get", get)
    outcomes = await _outcomes(
        *(
            reviews.claim(grading_id, principal_id=who, principal_name=who, minutes=5)
            for who in ("alice", "bob")
        )
    )
    armed["on"] = False
    assert outcomes == [Conflict.__name__, "ok"]


async def test_one_human_labelling_twice_at_once_stores_one_set_of_labels(store: Store) -> None:
    grading_id = await _graded(store)
    labels = LabelQueries(store.db)
    answers = dict.fromkeys(IDS, True)
    outcomes = await _outcomes(
        *(
            labels.add(
                grading_id,
                question_ids=IDS,
                answers=answers,
                verdict="pass",
                author_id="h1",
                author_name="Hana",
            )
            for _ in "ab"
        )
    )
    assert outcomes == [Conflict.__name__, "ok"]
    stored = await store.db.run_read(
        lambda s: s.execute(select(func.count()).select_from(HumanLabelRecord)).scalar_one()
    )
    assert stored == len(IDS) + 1


async def test_a_label_is_refused_once_an_override_made_the_grading_a_held_pass(
    api_client: Any, db_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The label's use case read the grading, then locked it: an override committed in
    between that made it a held pass went unseen, the label was stored and the review
    closed (the same label a moment later is refused). SQLite's one writer rules the
    interleaving out."""
    if db_backend != "postgres":
        pytest.skip("SQLite's one writer serializes the two use cases")
    async with api_client(start_workers=False) as client:
        services = client.app.state.services
        store = services.store
        grading_id = (await submit(store)).grading.id
        [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
        flagged = graded_result(SIX).model_copy(update={"review_reasons": ("injection_suspected",)})
        assert await store.queue.complete_many(
            [FinishedGrading(grading_id, "w", flagged, claim_count=claim.claim_count)]
        ) == [True]
        before = (await store.gradings.get(grading_id)).grading
        assert before.passed is False and not before.held

        read, go = threading.Event(), threading.Event()
        original = LabelQueries.add_in

        def add_in(self: LabelQueries, session: Any, *args: Any, **kw: Any) -> Any:
            read.set()  # the use case has read the grading; the lock comes next
            go.wait(10)
            return original(self, session, *args, **kw)

        monkeypatch.setattr(LabelQueries, "add_in", add_in)
        hana = Principal(id="h1", name="Hana", role="adjudicator")
        labelling = asyncio.create_task(
            label_grading(services, hana, grading_id, answers=dict.fromkeys(IDS, True))
        )
        assert await asyncio.to_thread(read.wait, 10)
        # meanwhile another adjudicator's answer override makes it a pass: held (flagged)
        _, after = await override(
            store,
            grading_id,
            rubric=sregym_rubric(),
            expected_revision=before.revision,
            kind="answer",
            question_id="D1-Q3",
            answer=True,
            reason="it does name the deployment",
            author_id="a2",
            author_name="Ana",
        )
        assert after.held and after.passed is None
        go.set()

        outcome = await asyncio.gather(labelling, return_exceptions=True)
        result = outcome[0]
        shown = getattr(getattr(result, "grading", None), "revision", None)
        assert isinstance(result, Conflict), (
            f"the label was stored on a held pass and its review closed "
            f"(answered with the grading at revision {shown}, held=False; it is at "
            f"revision {after.revision}, held=True): {type(result).__name__}"
        )


async def test_withdrawing_an_override_while_its_carried_copy_is_claimed_waits_for_the_claim(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hana withdraws her override at the moment Ines claims the grading a promote
    regrade carried it to (the claim holds that grading's row and is about to audit):
    the withdrawal locks the copy's grading before it audits anything, so it waits for
    the claim and both succeed, the copy withdrawn too."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    old_id = await _graded(store)
    original, _ = await override(
        store, old_id, rubric=sregym_rubric(), expected_revision=2, kind="verdict",
        reason="the judge missed the scope", author_id="h1", author_name="Hana", verdict="fail",
    )  # fmt: skip
    promote = RegradeTarget(
        rubric=sregym_rubric(),
        judge_spec="openai:new-judge@http://127.0.0.1:9/v1",
        judge_backend="openai",
        judge_model="new-judge",
        mode="promote",
    )
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), promote, actor="admin")
    [item] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(item.grading_id, "w", graded_result(IDS))
    new, old = await store.gradings.get(item.grading_id), await store.gradings.get(old_id)
    assert new is not None and old is not None
    assert new.grading.is_current and new.grading.passed is False  # the override was carried
    claim = ReviewQueries(store.db).claim(
        item.grading_id, principal_id="h2", principal_name="Ines", minutes=30
    )
    await race_at_audit(
        store,
        monkeypatch,
        "review.claimed",
        claim,
        lambda: override(
            store,
            old_id,
            rubric=sregym_rubric(),
            expected_revision=old.grading.revision,
            kind="withdraw",
            reason="I was wrong",
            author_id="h1",
            author_name="Hana",
            withdraws=original.id,
        ),
    )
    after = await store.gradings.get(item.grading_id)
    assert after is not None and after.grading.passed is True  # the copy withdrawn too


async def test_two_admins_defining_one_failure_tag_at_once_get_one_tag_and_one_conflict(
    engine: Any, store: Store
) -> None:
    """Both look the tag up before either writes it (a barrier holds them there where the
    engine lets them run side by side): the INSERT decides, and the second is a Conflict
    (409), never an integrity error (500)."""
    both_looked = threading.Barrier(2, timeout=2)

    def after(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if "tag_vocabulary" in statement and statement.lstrip().upper().startswith("SELECT"):
            with contextlib.suppress(threading.BrokenBarrierError):  # SQLite: one at a time
                both_looked.wait()

    tags = TagQueries(store.db)
    event.listen(engine, "after_cursor_execute", after)
    try:
        results = await asyncio.gather(
            tags.add_vocabulary("dns-misread", description="a", actor="admin-a"),
            tags.add_vocabulary("dns-misread", description="b", actor="admin-b"),
            return_exceptions=True,
        )
    finally:
        event.remove(engine, "after_cursor_execute", after)
    assert sorted(type(r).__name__ for r in results) == ["Conflict", "TagVocabularyRecord"]


async def test_labelling_a_grading_while_its_holder_releases_the_claim_stores_both(
    api_client: Any, db_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hana's page gives her claim back (the release holds the grading's row and is about
    to audit) as she labels the grading: the label waits for the release, then stores
    her labels and closes the review; neither transaction fails."""
    if db_backend != "postgres":
        pytest.skip("a race between PostgreSQL transactions")
    async with api_client(start_workers=False) as client:
        services = client.app.state.services
        store = services.store
        grading_id = await _graded(store)
        reviews = ReviewQueries(store.db)
        await reviews.claim(grading_id, principal_id="h1", principal_name="Hana", minutes=30)
        hana = Principal(id="h1", name="Hana", role="adjudicator")
        released, _ = await race_at_audit(
            store,
            monkeypatch,
            "review.released",
            reviews.release(grading_id, principal_id="h1"),
            lambda: label_grading(
                services, hana, grading_id, answers={"D1-Q1": True}, verdict="pass"
            ),
        )
        assert released is True
        review = await store.db.run_read(lambda s: s.get(ReviewClaimRecord, grading_id))
        assert review is not None and review.done_by == "h1" and review.claimed_by is None


async def test_a_release_racing_another_adjudicators_fresh_claim_leaves_that_claim(
    store: Store, monkeypatch: pytest.MonkeyPatch, clock: Clock
) -> None:
    """Hana's claim ran out; Ines claims the item (its row written, about to audit) as
    Hana's page walks past it and gives it back: the release waits for the claim, finds
    the item Ines's and leaves it hers (it stays hidden from other adjudicators)."""
    if not store.db.postgres:
        pytest.skip("a race between PostgreSQL transactions")
    grading_id = await _graded(store)
    reviews = ReviewQueries(store.db)
    await reviews.claim(grading_id, principal_id="h1", principal_name="Hana", minutes=1)
    clock.advance(120)
    _, released = await race_at_audit(
        store,
        monkeypatch,
        "review.claimed",
        reviews.claim(grading_id, principal_id="h2", principal_name="Ines", minutes=30),
        lambda: reviews.release(grading_id, principal_id="h1"),
    )
    claim = await store.db.run_read(lambda s: s.get(ReviewClaimRecord, grading_id))
    assert claim is not None
    assert (claim.claimed_by, released) == ("h2", False), f"held by {claim.claimed_by!r}"
