"""Smoke tests of the benchmark kit: the simulated judge answers what the service parses,
holds its slots, and the report ends with one JSON line. No timing targets here: those
are the benchmarks' business (``bench/``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.common import Figure, percentile, print_report
from bench.judge_sim import SimState, make_app
from judge.prompt import (
    build_answer_schema,
    build_messages,
    build_question_messages,
    build_reply_schema,
)
from judge.reply import parse_answer_reply, parse_reply
from judge.rubric import load_rubric_dir

TRUTH = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT is 9999"
DIAGNOSIS = "The geo deployment in hotel listens on GEO_PORT 9999 while its Service targets 8083."


def _request(messages: list[Any], schema: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "bench-sim",
        "messages": [m.model_dump() for m in messages],
        "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
    }


async def _complete(state: SimState, bodies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    transport = httpx.ASGITransport(app=make_app(state))
    async with httpx.AsyncClient(transport=transport, base_url="http://sim") as client:
        replies = await asyncio.gather(
            *(client.post("/v1/chat/completions", json=body) for body in bodies)
        )
    return [r.raise_for_status().json() for r in replies]


async def test_the_simulated_judge_replies_in_the_services_formats() -> None:
    rubric = load_rubric_dir()["sregym-rca"]
    single = _request(build_messages(rubric, TRUTH, DIAGNOSIS), build_reply_schema(rubric))
    one = _request(
        build_question_messages(rubric, TRUTH, DIAGNOSIS, "D2-Q1"), build_answer_schema()
    )
    state = SimState(latency=0, slots=2)
    whole, answer = await _complete(state, [single, one])
    parsed = parse_reply(whole["choices"][0]["message"]["content"], rubric)
    assert set(parsed) == {q.id for q in rubric.questions}
    assert all(a.answer and a.evidence in DIAGNOSIS for a in parsed.values())
    assert parse_answer_reply(answer["choices"][0]["message"]["content"], "D2-Q1").answer
    assert state.stats()["served"] == 2 and state.stats()["questions"] == 10


async def test_the_simulated_judge_holds_its_slots() -> None:
    state = SimState(latency=0.05, slots=2)
    started = time.perf_counter()
    await _complete(state, [{"messages": []}] * 6)
    assert time.perf_counter() - started >= 3 * 0.05  # six requests, two at a time
    assert state.stats()["max_in_flight"] == 2


def test_the_report_ends_with_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    print_report("smoke", "Smoke", [Figure("rate", 41.5, "/s", ">= 40/s", True)])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    line = json.loads(last)
    assert line["bench"] == "smoke" and line["rate"] == 41.5 and line["rate_met"] is True
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5, abs=0.01)


@pytest.mark.slow
@pytest.mark.parametrize(
    "script",
    [
        "judge_sim",
        "throughput",
        "overhead",
        "regrade",
        "batch_regrade",
        "prompt_tokens",
        "dry_run",
        "export",
        "webhooks",
        "cli_start",
        "judge_quality",
        "cpu_per_grading",
        "claims",
        "sregym_roundtrip",
        "slow_judge",
        "screening",
        "statement_cost",
        "search",
        "yaml_loads",
        "import_job",
    ],
)
def test_every_benchmark_script_runs_from_the_checkout(script: str) -> None:
    """``python bench/<name>.py --help`` works as docs/benchmarks.md says: no install of bench/."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "bench" / f"{script}.py"), "--help"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def test_judge_quality_asks_every_combination_on_a_subset_of_every_variant() -> None:
    from bench.judge_quality import Combo, balanced_subset, parse_combos
    from judge.calibration import DEFAULT_GOLD, load_gold

    combos = parse_combos("single:full, per_question:compact:positive,extraction")
    assert combos == [
        Combo("single", "full", "as_written"),
        Combo("per_question", "compact", "positive"),
        Combo("extraction", "full", "as_written"),
    ]
    items = load_gold(DEFAULT_GOLD.read_text(), load_rubric_dir()["sregym-rca"])
    subset = balanced_subset(items, 8)
    assert len(subset) == 8
    assert {i.variant for i in subset} == {"correct", "borderline", "wrong", "injection"}
    assert balanced_subset(items, None) == items


@pytest.mark.parametrize("layer", ["sqlite3", "sqlalchemy_sync", "sqlalchemy_session"])
def test_each_statement_cost_layer_does_the_same_work(layer: str, tmp_path: Path) -> None:
    """Every layer writes and reads back the same rows, so their costs compare like work."""
    import sqlite3

    from bench.statement_cost import LAYERS, new_database

    path = new_database(tmp_path / "bench.db")
    assert LAYERS[layer](path, 20) > 0
    db = sqlite3.connect(path)
    assert db.execute("SELECT count(*), min(n), max(n) FROM rows").fetchone() == (10, 0, 18)
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_statement_cost_prints_every_layer_and_the_ratio() -> None:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [
            sys.executable,
            str(root / "bench" / "statement_cost.py"),
            "--statements",
            "20",
            "--runs",
            "1",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for figure in ("sqlite3_us", "sqlalchemy_sync_us", "sqlalchemy_session_us", "session_to_core"):
        assert figure in done.stdout, done.stdout
