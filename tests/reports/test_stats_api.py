"""Pass rates, comparisons, breakdowns and exports over HTTP."""

from __future__ import annotations

import base64
import csv
import io
import json
from typing import Any

import pytest
from sqlalchemy.engine import Engine

import storage.attempts
from api.adjudication.tag_queries import TagQueries
from storage import Store
from storage.canonical import utcnow
from storage.cursors import CursorCodec
from storage.keys import ServiceKey
from tests.support.attempts import add_attempts, attempt_row, seed_attempts
from tests.support.gradings import add_grading, add_many
from tests.support.keys import session_key

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def _seed_arms(store: Store) -> None:
    """Model m-think 21/27, model m-plain 19/27 (plus unscored and pending apart)."""
    await add_many(store, {"pass": 21, "fail": 6, "unscored": 2}, agent="agent-x", model="m-think")
    await add_many(store, {"pass": 19, "fail": 8, "pending": 1}, agent="agent-x", model="m-plain")


async def test_pass_rates_with_wilson_intervals_per_group(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    await _seed_arms(Store(engine, key=session_key()))
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        response = await client.get(
            # the seeded gradings carry inline ground truths: counted apart unless asked
            "/v1/stats/pass-rates",
            params={"group_by": "model", "inline": "include"},
            headers=headers,
        )
    assert response.status_code == 200, response.text
    report = response.json()
    groups = {g["key"]["model"]: g for g in report["groups"]}
    plain = groups["m-plain"]
    assert (plain["n"], plain["passed"], plain["failed"]) == (27, 19, 8)
    assert (plain["unscored"], plain["pending"], plain["total"]) == (0, 1, 28)
    assert (round(plain["interval"]["low"], 3), round(plain["interval"]["high"], 3)) == (
        0.515,
        0.841,
    )
    assert plain["interval"]["method"] == "wilson" and plain["interval"]["confidence"] == 0.95
    think = groups["m-think"]
    assert (think["n"], think["passed"], think["unscored"]) == (27, 21, 2)
    overall = report["overall"]
    assert (overall["n"], overall["passed"], overall["unscored"], overall["pending"]) == (
        54,
        40,
        2,
        1,
    )
    assert report["verdicts"] == "effective" and report["group_by"] == ["model"]


async def test_compare_21_of_27_with_19_of_27(api_client: Any, tokens: Any, engine: Engine) -> None:
    await _seed_arms(Store(engine, key=session_key()))
    headers = await tokens("admin")
    async with api_client(start_workers=False) as client:
        response = await client.get(
            "/v1/stats/compare",
            params={
                "a.model": "m-think",
                "b.model": "m-plain",
                "verdicts": "judge",
                "a.inline": "include",
                "b.inline": "include",
            },
            headers=headers,
        )
    assert response.status_code == 200, response.text
    report = response.json()
    assert (report["a"]["outcome"]["passed"], report["a"]["outcome"]["n"]) == (21, 27)
    assert (report["b"]["outcome"]["passed"], report["b"]["outcome"]["n"]) == (19, 27)
    difference = report["difference"]
    assert abs(difference["estimate"] - 2 / 27) < 1e-9
    assert difference["interval"]["low"] < 0 < difference["interval"]["high"]
    assert abs(difference["p_value"] - 0.757) < 1e-3
    assert report["by_scenario"] is None and report["note"] is None  # no scenario repeats


async def test_compare_with_repeated_scenarios_reports_scenarios_as_the_unit(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    store = Store(engine, key=session_key())
    for scenario, (a_pass, b_pass) in {"s1": (3, 1), "s2": (2, 2), "s3": (1, 0)}.items():
        await add_many(store, {"pass": a_pass, "fail": 3 - a_pass}, agent="a", scenario_id=scenario)
        await add_many(store, {"pass": b_pass, "fail": 3 - b_pass}, agent="b", scenario_id=scenario)
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        response = await client.get(
            "/v1/stats/compare", params={"a.agent": "a", "b.agent": "b"}, headers=headers
        )
    report = response.json()
    assert report["a"]["scenarios"] == 3 and report["a"]["max_attempts_per_scenario"] == 3
    assert "correlated" in report["note"]
    by_scenario = report["by_scenario"]
    assert by_scenario["design"] == "paired" and by_scenario["scenarios_a"] == 3
    assert abs(by_scenario["estimate"] - 1 / 3) < 1e-9
    assert by_scenario["interval"]["method"] == "paired-t"


async def test_bad_parameters_are_422_naming_the_field(api_client: Any, tokens: Any) -> None:
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        cases = [
            ("/v1/stats/pass-rates", {"group_by": "agent,colour"}, "group_by"),
            ("/v1/stats/compare", {"a.agent": "x"}, "b.*"),
            ("/v1/stats/compare", {"a.agent": "x", "b.colour": "y"}, "b.colour"),
            ("/v1/stats/compare", {"a.created_after": "soon", "b.agent": "y"}, "a.created_after"),
        ]
        for path, params, field in cases:
            response = await client.get(path, params=params, headers=headers)
            assert response.status_code == 422, (params, response.text)
            assert response.json()["errors"][0]["field"] == field
        verdicts = await client.get(
            "/v1/stats/pass-rates", params={"verdicts": "mine"}, headers=headers
        )
        assert verdicts.status_code in (400, 422)


async def test_stats_are_for_adjudicators_and_admins(api_client: Any, tokens: Any) -> None:
    submitter = await tokens("submitter")
    async with api_client(start_workers=False) as client:
        for path in ("pass-rates", "questions", "dimensions", "failure-tags"):
            assert (await client.get(f"/v1/stats/{path}", headers=submitter)).status_code == 403
            assert (await client.get(f"/v1/stats/{path}")).status_code == 401


async def test_questions_dimensions_and_tags(api_client: Any, tokens: Any, engine: Engine) -> None:
    store = Store(engine, key=session_key())
    await TagQueries(store.db).ensure_vocabulary(
        {"stopped-early": "stopped at the first useful answer"}
    )
    failing = await add_grading(store, "fail", agent="a")
    await add_many(store, {"pass": 2, "unscored": 1}, agent="a")
    await TagQueries(store.db).add(
        failing, tag="stopped-early", note="", author_id="x", author_name="X"
    )
    headers = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        mixed = "inline=include"  # the seeded gradings carry inline ground truths
        questions = (await client.get(f"/v1/stats/questions?{mixed}", headers=headers)).json()
        dimensions = (await client.get(f"/v1/stats/dimensions?{mixed}", headers=headers)).json()
        tags = (
            await client.get(f"/v1/stats/failure-tags?group_by=agent&{mixed}", headers=headers)
        ).json()
    first = questions["questions"][0]
    assert (first["question_id"], first["n"], first["yes"]) == ("D1-Q1", 3, 3)
    d3 = next(q for q in questions["questions"] if q["question_id"] == "D3-Q1")
    assert (d3["yes"], d3["n"]) == (2, 3) and d3["interval"]["high"] < 1
    by_dimension = {d["dimension_id"]: d for d in dimensions["dimensions"]}
    assert by_dimension["D3"]["zero_yes"]["successes"] == 1
    assert by_dimension["D3"]["zero_yes"]["n"] == 1 and by_dimension["D1"]["failing"] == 1
    [tag] = tags["tags"]
    assert (tag["key"], tag["tag"], tag["tagged"], tag["n"]) == (
        {"agent": "a"},
        "stopped-early",
        1,
        4,
    )


async def test_export_route_streams_csv_jsonl_and_sregym_for_admins(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    store = Store(engine, key=session_key())
    await add_grading(store, "pass", agent="a", scenario_id="hotel/port", attempt=2)
    await add_grading(store, "unscored", agent="a")
    admin, adjudicator = await tokens("admin"), await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        forbidden = await client.get("/v1/exports/gradings", headers=adjudicator)
        jsonl = await client.get("/v1/exports/gradings?format=jsonl", headers=admin)
        plain = await client.get("/v1/exports/gradings?format=csv&agent=a", headers=admin)
        sregym = await client.get("/v1/exports/gradings?format=sregym", headers=admin)
    assert forbidden.status_code == 403
    lines = [json.loads(line) for line in jsonl.text.splitlines()]
    assert [g["status"] for g in lines] == ["graded", "unscored"]
    assert len(lines[0]["answers"]) == 9 and lines[0]["submission"]["ground_truth"]
    rows = list(csv.DictReader(io.StringIO(plain.text)))
    assert plain.headers["content-type"].startswith("text/csv")
    assert [r["status"] for r in rows] == ["graded", "unscored"]
    assert rows[0]["D1-Q1"] == "yes" and rows[0]["D1-Q1.judge"] == "yes" and rows[1]["D1-Q1"] == ""
    [graded, unscored] = list(csv.DictReader(io.StringIO(sregym.text)))
    assert (graded["problem_id"], graded["attempt"], graded["Diagnosis.success"]) == (
        "hotel/port",
        "2",
        "True",
    )
    assert unscored["Diagnosis.success"] == "" and unscored["Diagnosis.checklist"] == "[]"


def _attempt_order(made: dict[tuple[str, str], int]) -> list[tuple[str, str, int]]:
    """The attempt report's rows: most attempts first, then by token and scenario id."""
    rows = [(token, scenario, count) for (token, scenario), count in made.items()]
    return sorted(rows, key=lambda row: (-row[2], row[0], row[1]))


def _attempt_rows(items: list[dict[str, Any]]) -> list[tuple[str, str, int]]:
    return [(i["token_id"], i["scenario_id"], i["attempts"]) for i in items]


async def _attempt_pages(
    client: Any, headers: dict[str, str], **params: Any
) -> list[dict[str, Any]]:
    """Every page of ``/v1/stats/attempts``, following ``next_cursor``."""
    pages: list[dict[str, Any]] = []
    while not pages or pages[-1]["next_cursor"]:
        cursor = {"cursor": pages[-1]["next_cursor"]} if pages else {}
        answer = await client.get(
            "/v1/stats/attempts", params={**params, **cursor}, headers=headers
        )
        assert answer.status_code == 200, answer.text
        pages.append(answer.json())
    return pages


async def test_the_attempt_report_answers_every_pair_within_its_page_bound(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """Six tokens that each attempted 90 scenarios within the hour: all 540 pairs in one
    answer (a page holds up to 5000), ``next_cursor`` null."""
    made = seed_attempts(engine, tokens=6, scenarios=90)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        answer = await client.get("/v1/stats/attempts", headers=admin)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert _attempt_rows(report["items"]) == _attempt_order(made)
    assert report["next_cursor"] is None


async def test_the_attempt_report_pages_past_its_bound_over_one_period(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the page bound, ``next_cursor`` leads on in the report's order (ties of
    attempts by token, then scenario) until null; the pages keep the first page's
    period, so attempts made while paging change no count and no pair is listed twice
    or left out. ``limit`` asks for smaller pages."""
    monkeypatch.setattr(storage.attempts, "MAX_PAGE", 5)
    made = seed_attempts(engine, tokens=4, scenarios=6, attempts=lambda t, s: 1 + (t + s) % 3)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        first = (await client.get("/v1/stats/attempts", headers=admin)).json()
        last = first["items"][-1]  # a new attempt on the first page's last pair
        add_attempts(engine, [attempt_row(last["token_id"], last["scenario_id"], utcnow())])
        rest = await _attempt_pages(client, admin, cursor=first["next_cursor"])
        small = await _attempt_pages(client, admin, limit=2)
    pages = [first, *rest]
    assert [len(p["items"]) for p in pages] == [5, 5, 5, 5, 4]
    assert _attempt_rows([i for p in pages for i in p["items"]]) == _attempt_order(made)
    assert {(p["since"], p["until"]) for p in pages} == {(first["since"], first["until"])}
    # a new period: the attempt made while paging counts now
    assert [len(p["items"]) for p in small] == [2] * 12
    assert len({(i["token_id"], i["scenario_id"]) for p in small for i in p["items"]}) == 24


async def test_a_forged_attempt_cursor_or_another_period_is_a_400_naming_cursor(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A cursor edited, signed with another key or for another list, or sent with a
    ``created_after`` other than its first page's, is refused."""
    seed_attempts(engine, tokens=2, scenarios=2)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        first = await client.get(
            "/v1/stats/attempts", params={"limit": 1, "created_after": "2020-01-01T00:00:00Z"},
            headers=admin,
        )  # fmt: skip
        cursor = first.json()["next_cursor"]
        payload, tag = cursor.split(".")
        position = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        refused: list[dict[str, str]] = [
            {"cursor": payload[:-1] + ("A" if payload[-1] != "A" else "B") + f".{tag}"},
            {"cursor": CursorCodec(ServiceKey(b"o" * 40), "attempts").encode(position)},
            {"cursor": CursorCodec(session_key(), "gradings").encode(position)},
            {"cursor": "not-a-cursor"},
            {"cursor": cursor, "created_after": "2021-01-01T00:00:00Z"},
        ]
        answers = [
            await client.get("/v1/stats/attempts", params=params, headers=admin)
            for params in refused
        ]
        same = await client.get(
            "/v1/stats/attempts",
            params={"cursor": cursor, "limit": 1, "created_after": "2020-01-01T00:00:00Z"},
            headers=admin,
        )
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert [e["field"] for e in answer.json()["errors"]] == ["cursor"]
    assert same.status_code == 200, same.text
