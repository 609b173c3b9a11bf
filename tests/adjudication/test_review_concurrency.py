"""Review rows change one transaction after another per grading, on every engine: of two
claims at once one holds the item and the other sees it held; one human labelling twice
at once stores one set of labels."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api.adjudication.label_queries import LabelQueries
from api.adjudication.review_queries import ReviewQueries
from storage import Store
from storage.errors import Conflict
from storage.review_tables import HumanLabelRecord, ReviewClaimRecord
from tests.storage.helpers import graded_result, submit
from tests.support.submissions import IDS

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
