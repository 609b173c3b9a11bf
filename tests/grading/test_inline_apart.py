"""Self-graded gradings (inline ground truths) are counted apart in every report by
default, as held passes are, and mixed in only when asked."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from storage import Store
from tests.support.gradings import add_many
from tests.support.keys import session_key


async def _seed(engine: Engine) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 2, "fail": 2}, scenario_id="hotel/user-port", agent="a")
    # self-graded: the harness sent its own ground truth, and every one passes
    await add_many(store, {"pass": 5}, agent="a")
    await add_many(store, {"pass": 1}, agent="b")  # an agent that only graded itself


async def test_inline_gradings_are_counted_apart_unless_asked_for(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    await _seed(engine)
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:

        async def get(path: str, **params: str) -> dict[str, Any]:
            response = await client.get(path, params=params, headers=headers)
            assert response.status_code == 200, response.text
            return dict(response.json())

        apart = await get("/v1/stats/pass-rates")
        mixed = await get("/v1/stats/pass-rates", inline="include")
        asked = await get("/v1/stats/pass-rates", ground_truth_source="inline")
        by_source = await get("/v1/stats/pass-rates", group_by="source")
        questions = await get("/v1/stats/questions")
        questions_mixed = await get("/v1/stats/questions", inline="include")
        compare = await get(
            "/v1/stats/compare", **{"a.agent": "a", "b.scenario_id": "hotel/user-port"}
        )
        only_inline = await client.get(
            "/v1/stats/compare", params={"a.agent": "a", "b.agent": "b"}, headers=headers
        )
        bad = await client.get("/v1/stats/pass-rates?inline=sometimes", headers=headers)
    overall = apart["overall"]
    assert (overall["n"], overall["passed"], overall["inline"], overall["total"]) == (4, 2, 6, 4)
    assert overall["pass_rate"] == 0.5
    assert any(line.startswith("INLINE: 6 gradings against inline") for line in apart["scope"])
    assert "inline" not in apart["filters"]
    assert (mixed["overall"]["n"], mixed["overall"]["passed"], mixed["overall"]["inline"]) == (
        10,
        8,
        0,
    )
    assert any("mixed in" in line for line in mixed["scope"])
    assert (asked["overall"]["n"], asked["overall"]["passed"]) == (6, 6)
    groups = {g["key"]["source"]: (g["passed"], g["n"]) for g in by_source["groups"]}
    assert groups == {"scenario": (2, 4), "inline": (6, 6)}
    d1 = next(q for q in questions["questions"] if q["question_id"] == "D1-Q1")
    d1_mixed = next(q for q in questions_mixed["questions"] if q["question_id"] == "D1-Q1")
    assert (d1["n"], d1_mixed["n"]) == (4, 10)
    assert compare["a"]["outcome"]["inline"] == 5 and compare["a"]["outcome"]["n"] == 4
    assert only_inline.status_code == 422
    assert (
        "1 gradings against inline ground truths count only with b.inline=include"
        in (only_inline.json()["detail"])
    )
    assert bad.status_code in (400, 422)
