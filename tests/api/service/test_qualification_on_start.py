"""``serve`` states on start whether its judge is qualified on the shipped calibration set.

An operator reading the start-up log learns, without a query, whether the gradings of
this judge will be provisional and how the judge did on the calibration set that ships
with the package (verdict kappa, false-pass rate, size, date).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.service.qualification import judge_settings, qualification_on_start
from api.service.settings import Settings
from judge.calibration import DEFAULT_GOLD
from storage import Store
from storage.quality_tables import CalibrationRunRecord
from tests.storage.helpers import sregym_rubric
from tests.support.keys import session_key
from tests.support.service_process import serving

SPEC = "scripted:pass"


def _run(settings: Settings, *, qualified: bool, kappa: float, gold: bytes) -> CalibrationRunRecord:
    return CalibrationRunRecord(
        judge_spec=SPEC,
        judge_settings=judge_settings(settings),
        rubric_id="sregym-rca",
        rubric_version=sregym_rubric().version,
        asking_mode="single",
        gold_name="x.jsonl",
        gold_sha256=hashlib.sha256(gold).hexdigest(),
        n=73,
        verdict_kappa=kappa,
        false_pass_rate=0.025,
        qualified=qualified,
    )


async def test_the_statement_follows_the_runs_on_the_shipped_set(
    engine: Engine, database_url: str
) -> None:
    store, rubric = Store(engine, key=session_key()), sregym_rubric()
    settings = Settings(judge=f"{SPEC}@http://10.0.0.9:1", database_url=database_url)
    line = await qualification_on_start(store, settings, rubric)
    who = f"judge {SPEC} (rubric sregym-rca@{rubric.version}, asking single, replies full)"
    assert line.startswith(who)
    assert "not calibrated on sregym-v1.jsonl" in line and "provisional" in line
    assert "10.0.0.9" not in line  # the base URL is not part of a judge's identity
    await store.calibration.add_run(
        _run(settings, qualified=True, kappa=0.712, gold=DEFAULT_GOLD.read_bytes())
    )
    line = await qualification_on_start(store, settings, rubric)
    assert ": qualified on sregym-v1.jsonl: verdict kappa 0.712 (bar 0.60)" in line
    assert "false-pass rate 0.025 (bar 0.05), n 73" in line
    assert line.endswith("its gradings are not provisional")
    # a later failed run on another gold set makes gradings provisional; the set's own
    # figures are still those of its latest run
    await store.calibration.add_run(_run(settings, qualified=False, kappa=0.2, gold=b"other"))
    line = await qualification_on_start(store, settings, rubric)
    assert "qualified on sregym-v1.jsonl: verdict kappa 0.712" in line
    assert line.endswith("its gradings are provisional")
    await store.calibration.add_run(
        _run(settings, qualified=False, kappa=0.31, gold=DEFAULT_GOLD.read_bytes())
    )
    line = await qualification_on_start(store, settings, rubric)
    assert "NOT qualified on sregym-v1.jsonl: verdict kappa 0.310 (bar 0.60)" in line


async def test_with_a_panel_the_statement_names_each_member(
    engine: Engine, database_url: str
) -> None:
    """A panel is qualified while every member is: the line names each member's
    qualification, and its gradings are provisional while any member's are."""
    store, rubric = Store(engine, key=session_key()), sregym_rubric()
    panel = f"{SPEC}@http://10.0.0.9:1,scripted:fail"
    settings = Settings(judge=SPEC, panel=panel, database_url=database_url)
    await store.calibration.add_run(
        _run(settings, qualified=True, kappa=0.712, gold=DEFAULT_GOLD.read_bytes())
    )
    line = await qualification_on_start(store, settings, rubric)
    assert line.startswith("panel of 2 judges, each qualified on its own: judge scripted:pass")
    assert "scripted:pass (rubric" in line and ": qualified on sregym-v1.jsonl" in line
    assert "judge scripted:fail (rubric" in line and "not calibrated on sregym-v1" in line
    assert line.endswith("its gradings are provisional")


async def test_the_app_logs_the_statement_when_it_starts(
    api_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="sre_judge.qualification"):
        async with api_client(judge=SPEC, start_workers=False) as client:
            assert (await client.get("/healthz")).status_code == 200
    lines = [r.getMessage() for r in caplog.records if r.name == "sre_judge.qualification"]
    assert len(lines) == 1
    assert lines[0].startswith(f"judge {SPEC} ") and "sregym-v1.jsonl" in lines[0]


@pytest.mark.slow
async def test_sre_judge_serve_says_so_in_its_log(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    settings = Settings(judge=SPEC, database_url=database_url)
    await Store(engine, key=session_key()).calibration.add_run(
        _run(settings, qualified=True, kappa=0.64, gold=DEFAULT_GOLD.read_bytes())
    )
    env = {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE": SPEC}
    with serving(env, tmp_path / "serve.log"):
        pass
    records = [
        json.loads(line)
        for line in (tmp_path / "serve.log").read_text(encoding="utf-8").splitlines()
        if line.startswith("{")
    ]
    said = [r["message"] for r in records if r.get("logger") == "sre_judge.qualification"]
    assert said and "qualified on sregym-v1.jsonl: verdict kappa 0.640" in said[0]


async def test_the_statement_names_a_profiled_judges_asking(
    engine: Engine, database_url: str
) -> None:
    spec = "ollama:qwen2.5-coder:1.5b"
    settings = Settings(judge=spec, database_url=database_url)
    line = await qualification_on_start(Store(engine, key=session_key()), settings, sregym_rubric())
    assert "asking extraction, replies compact, profile small-qwen-coder)" in line
    off = Settings(judge=spec, database_url=database_url, judge_profile="none")
    line = await qualification_on_start(Store(engine, key=session_key()), off, sregym_rubric())
    assert "asking single, replies full)" in line
