"""Reports over HTTP: shadow gradings on request, provisional ones marked, empty arms refused."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from storage import Store
from tests.storage.helpers import graded_result, sregym_rubric
from tests.support.gradings import FAIL_D3, add_many, shadow_regrade
from tests.support.keys import session_key

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: the seeded gradings carry inline ground truths: these reports mix them in
MIXED = {"inline": "include"}
ARMS = {
    "a.judge": "openai:judge-model",
    "b.judge": "openai:new-judge",
    "a.inline": "include",
    "b.inline": "include",
}


async def test_an_empty_arm_is_422_naming_its_filter(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 6, "fail": 4})
    await shadow_regrade(store, passing=3)
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        empty = await client.get("/v1/stats/compare", params=ARMS, headers=headers)
        shadow = await client.get(
            "/v1/stats/compare", params={**ARMS, "b.include": "shadow"}, headers=headers
        )
        rates = await client.get(
            "/v1/stats/pass-rates",
            params={"include": "shadow", "group_by": "judge", **MIXED},
            headers=headers,
        )
    assert empty.status_code == 422, empty.text
    assert empty.headers["content-type"].startswith("application/problem+json")
    problem = empty.json()
    assert problem["errors"][0]["field"] == "b.*"
    assert (
        "arm b (judge=openai:new-judge) has no passed or failed grading (n=0" in problem["detail"]
    )
    assert "b.include=shadow" in problem["detail"]
    assert shadow.status_code == 200, shadow.text
    report = shadow.json()
    assert (report["b"]["outcome"]["passed"], report["b"]["outcome"]["n"]) == (3, 10)
    assert report["b"]["filters"] == {"judge": "openai:new-judge", "include": "shadow"}
    groups = {g["key"]["judge"]: (g["passed"], g["n"]) for g in rates.json()["groups"]}
    assert groups == {"openai:judge-model": (6, 10), "openai:new-judge": (3, 10)}


async def test_provisional_gradings_are_marked_excluded_or_split(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 3, "fail": 1})
    await add_many(store, {"pass": 1, "fail": 1}, provisional=True)
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        every = (await client.get("/v1/stats/pass-rates", params=MIXED, headers=headers)).json()
        qualified = (
            await client.get(
                "/v1/stats/pass-rates",
                params={"provisional": "exclude", **MIXED},
                headers=headers,
            )
        ).json()
        split = (
            await client.get(
                "/v1/stats/pass-rates",
                params={"group_by": "provisional", **MIXED},
                headers=headers,
            )
        ).json()
        questions = (await client.get("/v1/stats/questions", params=MIXED, headers=headers)).json()
        bad = await client.get(
            "/v1/stats/pass-rates", params={"provisional": "maybe"}, headers=headers
        )
    assert (every["overall"]["n"], every["overall"]["provisional"]) == (6, 2)
    assert any(line.startswith("PROVISIONAL: 2 of 6 gradings") for line in every["scope"])
    assert (qualified["overall"]["n"], qualified["overall"]["provisional"]) == (4, 0)
    assert "provisional gradings (judge not yet qualified) left out" in qualified["scope"]
    rows = {g["key"]["provisional"]: (g["passed"], g["n"]) for g in split["groups"]}
    assert rows == {"provisional": (1, 2), "qualified": (3, 4)}
    assert questions["provisional"] == 2
    assert "verdicts: effective verdicts (after human overrides)" in questions["scope"]
    assert bad.status_code in (400, 422)


async def test_a_second_shadow_regrade_running_or_paused_hides_nothing_finished(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """The same shadow regrade started again and paused before it graded anything: its
    pending items, being newer, hid the first run's verdicts (n 10 -> 0, 10 pending)
    though nothing new was graded. Once it grades an item, that item's newer verdict is
    the one counted, and never twice."""
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 6, "fail": 4})
    await shadow_regrade(store, passing=3)
    jobs = RegradeJobQueries(store.db)
    target = RegradeTarget(
        sregym_rubric(), "openai:new-judge@http://127.0.0.1:9/v1", "openai", "new-judge",
        "shadow",
    )  # fmt: skip
    again = (await jobs.create_job(RegradeFilter(), target, actor="admin")).job
    await jobs.change_job(again.id, "pause", actor="admin")
    headers = await tokens("adjudicator")
    params = {"include": "shadow", "judge": "openai:new-judge", **MIXED}

    async def overall() -> tuple[int, int, int]:
        async with api_client(start_workers=False) as client:
            got = await client.get("/v1/stats/pass-rates", params=params, headers=headers)
        figures = got.json()["overall"]
        return figures["passed"], figures["n"], figures["pending"]

    assert await overall() == (3, 10, 0)
    await jobs.change_job(again.id, "resume", actor="admin")
    [claim] = await store.queue.claim_pending("w", limit=1, lease_seconds=60)
    assert await store.queue.complete(claim.grading_id, "w", graded_result(FAIL_D3))
    passed, n, pending = await overall()
    assert n == 10 and pending == 0 and passed in (2, 3)  # one verdict replaced, by a fail
