"""Smoke tests of the benchmark kit: the simulated judge answers what the service parses,
holds its slots, and the report ends with one JSON line. No timing targets here: those
are the benchmarks' business (``bench/``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from bench import export, sregym_roundtrip
from bench.common import Figure, percentile, print_report
from bench.cpu_per_grading import _Statements
from bench.judge_quality import Combo, balanced_subset, parse_combos, saved_figures
from bench.judge_sim import SimState, make_app
from bench.regrade import _figures as regrade_figures
from bench.saved_gradings import save_result, saved_results
from bench.service import create_token, proc_memory_kib
from bench.statement_cost import LAYERS, new_database
from bench.throughput import _figures as throughput_figures
from bench.throughput import _watch
from judge.backends.scripted import ScriptedBackend
from judge.calibration import DEFAULT_GOLD, load_gold
from judge.grader import Grader
from judge.prompt import (
    build_answer_schema,
    build_messages,
    build_question_messages,
    build_reply_schema,
)
from judge.reply import parse_answer_reply, parse_reply
from judge.rubric import load_rubric_dir
from storage import make_engine

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


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_statement_cost_runs_exactly_the_statements_it_divides_by(
    layer: str, tmp_path: Path
) -> None:
    """A run is whole transactions of ten: a count that is not a multiple of ten is
    refused before anything runs, so the CPU is always divided by the statements run."""
    path = new_database(tmp_path / "bench.db")
    with pytest.raises(ValueError, match="multiple of 10"):
        LAYERS[layer](path, 25)
    LAYERS[layer](path, 30)
    db = sqlite3.connect(path)
    (rows,) = db.execute("SELECT count(*) FROM rows").fetchone()
    db.close()
    assert 2 * rows == 30  # an INSERT and a SELECT of each row


def test_cpu_per_grading_counts_begin_as_a_statement_and_commit_as_the_transaction(
    tmp_path: Path,
) -> None:
    """On SQLite a transaction of one statement counts 2 statements (its BEGIN and the
    statement; the COMMIT is the driver's call, not a statement sent) and 1 transaction."""
    engine = make_engine(f"sqlite:///{tmp_path / 'bench.db'}")
    try:
        counted = _Statements(engine)
        counted.on = True
        with engine.begin() as connection:
            connection.execute(text("SELECT 1"))
        counted.on = False
    finally:
        engine.dispose()
    assert (counted.statements, counted.transactions) == (2, 1)


def _regrade_raw(seconds: float, n: int) -> dict[str, object]:
    return {
        "seed_seconds": 10.0,
        "same": {"seconds": 5.0, "cpu_seconds": 5.0, "cache_hits": 9 * n},
        "same_judge": {"served": 0, "questions": 0},
        "reworded": {"seconds": seconds, "cpu_seconds": 20.0, "failed": 0},
        "reworded_judge": {"served": n, "questions": n},
    }


@pytest.mark.parametrize(("seconds", "met"), [(55.5, True), (55.7, False)])
def test_the_reworded_regrade_is_judged_against_its_documented_target(
    seconds: float, met: bool
) -> None:
    """The reworded regrade's ratio to the ideal wall time meets its target at 0.90, as
    docs/benchmarks.md gives it: 2,000 calls at C / L = 40/s are 50 s ideal."""
    args = argparse.Namespace(gradings=2000, slots=8, latency=0.2)
    figures = {
        f.name: f for f in regrade_figures(_regrade_raw(seconds, 2000), args, "per_question")
    }
    ratio = figures["per_question_reworded_ratio_to_ideal"]
    assert ratio.target == ">= 0.90"
    assert ratio.met is met


def _throughput_run(marks: dict[str, Any], end_mib: float) -> dict[str, Any]:
    return {
        "db": "sqlite", "seconds": 2.0, "rate": 50.0, "limit": 40.0, "submit_seconds": 1.0,
        "cpu_seconds": 1.0, "judge_requests": 100, "judge_max_in_flight": 8, "unscored": 0,
        "rss_start_mib": marks["rss_start_mib"], "rss_at_500_mib": marks.get("rss_at_500_mib"),
        "rss_end_mib": end_mib, "rss_peak_mib": end_mib,
    }  # fmt: skip


def test_throughput_judges_flat_memory_only_past_500_gradings(tmp_path: Path) -> None:
    """A run of 500 submissions or fewer takes no sample after 500 gradings and says
    nothing of flatness; a longer run judges its end against that sample."""
    path = tmp_path / "bench.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE grading (status TEXT)")
    db.executemany("INSERT INTO grading VALUES (?)", [("graded",)] * 100)
    db.commit()
    db.close()
    service = SimpleNamespace(pid=os.getpid())  # this process's memory stands in
    marks = asyncio.run(_watch(service, f"sqlite:///{path}", 100, seconds=10))  # type: ignore[arg-type]
    assert "rss_at_500_mib" not in marks
    end = proc_memory_kib(os.getpid())["VmRSS"] / 1024
    short = {f.name: f for f in throughput_figures(_throughput_run(marks, end), 100)}
    assert short["sqlite_rss_after_100_mib"].met is None
    assert "sqlite_rss_after_500_mib" not in short
    long = {"rss_start_mib": 100.0, "rss_at_500_mib": 150.0}
    judged = {f.name: f for f in throughput_figures(_throughput_run(long, 170.0), 2000)}
    assert judged["sqlite_rss_after_2000_mib"].met is False  # +13 %


def _gold_without_ids() -> str:
    ids = [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
    lines = []
    for n, answer in enumerate(("yes", "no", "yes")):
        item = {
            "ground_truth": TRUTH,
            "diagnosis": f"Diagnosis {n}: the geo deployment in hotel listens on GEO_PORT 9999.",
            "answers": dict.fromkeys(ids, answer),
            "variant": "correct" if answer == "yes" else "wrong",
        }
        lines.append(json.dumps(item))
    return "\n".join(lines) + "\n"


async def test_judge_quality_saves_and_reads_back_gold_items_without_ids(tmp_path: Path) -> None:
    """A gold file may leave out item ids: every item's grading is still saved as its
    own, read back (a stopped run resumes from it) and counted by ``--from-saved``."""
    rubric = load_rubric_dir()["sregym-rca"]
    items = load_gold(_gold_without_ids(), rubric)
    assert [item.id for item in items] == [None, None, None]
    grader = Grader(ScriptedBackend(model="pass"))
    combo = Combo("single", "full", "as_written")
    save = tmp_path / "saved.jsonl"
    for item in items:
        save_result(
            save, combo, item, await grader.grade(rubric, item.ground_truth, item.diagnosis)
        )
    assert len(saved_results(save)) == 3
    cases = {f.name: f.value for f in saved_figures(save, rubric, items)}
    assert cases[f"{combo.name}: cases"] == "3"


@pytest.mark.slow
def test_sregym_roundtrip_runs_to_its_figures(tmp_path: Path) -> None:
    """``bench/sregym_roundtrip.py`` imports a results folder, exports it back as the
    same files and reports its figures."""
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    figures = asyncio.run(sregym_roundtrip.run(url, 1, 1, tmp_path / "results"))
    shown = {f.name: f.value for f in figures}
    assert shown["attempts"] == 45
    assert shown["folder_identical"] is True


@pytest.mark.slow
def test_export_seeds_a_database_whose_tokens_the_service_made(tmp_path: Path) -> None:
    """``bench/export.py`` seeds the database its servers run on with the deployment's
    key, after making the admin token with ``sre-judge tokens create``."""
    url = f"sqlite:///{tmp_path / 'bench.db'}"
    key_file = tmp_path / "sre-judge.key"
    env = {
        "SRE_JUDGE_DATABASE_URL": url,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_SECRET_KEY_FILE": str(key_file),
    }
    create_token(env, "admin")
    asyncio.run(export.seed(url, 3, key_file=key_file))
    db = sqlite3.connect(tmp_path / "bench.db")
    rows = db.execute("SELECT status, count(*) FROM grading GROUP BY status").fetchall()
    db.close()
    assert rows == [("graded", 3)]


@pytest.mark.slow
def test_export_runs_again_on_a_kept_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bench/export.py --database URL`` keeps the database's service key beside it, so
    a second run on the same database tops it up and measures again."""
    monkeypatch.delenv("SRE_JUDGE_SECRET_KEY_FILE")
    url = f"sqlite:///{tmp_path / 'kept.db'}"
    args = argparse.Namespace(database=url, db="sqlite", gradings=2, formats="jsonl", baseline=None)
    first = asyncio.run(export.run(args))
    second = asyncio.run(export.run(args))
    assert first["jsonl"]["rows"] == second["jsonl"]["rows"] == "2"
    assert (tmp_path / "kept.db.key").is_file()
