"""Calibration, qualification, provisional gradings and drift, with scripted judges."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from api.judges.calibration import calibrate, drifted
from api.service.grader_factory import asking_choice, grader_for
from api.service.qualification import (
    Qualifications,
    identity_of,
    in_review_sample,
    judge_settings,
)
from api.service.runtime import Runtime
from api.service.settings import Settings
from judge.backends import OllamaBackend
from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.calibration import (
    DEFAULT_GOLD,
    calibration_figures,
    grade_gold,
    load_gold,
    qualifies,
)
from judge.calls import JudgeRequest
from judge.grader import Grader
from judge.spec import judge_identity
from storage import Store
from storage.quality_tables import CalibrationRunRecord
from tests.judges.test_canary import JUDGE, DigestOutOfTime, LabelledJudge
from tests.storage.helpers import sregym_rubric
from tests.support.in_process_cli import cli_in_process, run_cli
from tests.support.keys import session_key
from tests.support.qualification import qualify

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

GOLD = Path(__file__).parents[1] / "fixtures" / "gold-small.jsonl"
TRUTH = "[fault_spec] component=deployment/user-service; namespace=hotel || USER_PORT=9999"


def _discerning(request: JudgeRequest) -> str:
    """Yes to everything for diagnoses saying calls are refused (two of the three good)."""
    said = "\n".join(m.content for m in request.messages)
    return scripted_reply(request, yes=None if "refused" in said else set())


async def test_a_discerning_judge_qualifies_and_a_lenient_one_does_not() -> None:
    rubric = sregym_rubric()
    items = load_gold(GOLD.read_text(), rubric)
    assert len(items) == 6
    lenient = await grade_gold(
        Grader(ScriptedBackend.for_mode("pass")), rubric, items, concurrency=2
    )
    figures = calibration_figures(rubric, items, lenient)
    assert (figures.gold_fails, figures.false_passes, figures.false_pass_rate) == (3, 3, 1.0)
    assert figures.verdict_kappa is None  # the judge always passed: one category only
    assert not qualifies(figures, min_kappa=0.6, max_false_pass=0.05)
    # passes good-1 and good-3, never a bad one: 2, 0, 1, 3 (po 5/6, pe 1/2)
    backend = ScriptedBackend([_discerning] * 6)
    results = await grade_gold(Grader(backend), rubric, items, concurrency=1)
    figures = calibration_figures(rubric, items, results)
    assert figures.false_passes == 0 and figures.false_pass_rate == 0.0
    assert figures.verdict_kappa == pytest.approx(2 / 3)
    assert qualifies(figures, min_kappa=0.6, max_false_pass=0.05)
    assert not qualifies(figures, min_kappa=0.7, max_false_pass=0.05)


#: (gold verdict, judge passes, how many): kappa exactly 3/5 (p_o 31/35, p_e 89/175),
#: one false pass of 28 gold fails
CELLS = (("pass", True, 4), ("fail", True, 1), ("pass", False, 3), ("fail", False, 27))


def _at_the_bar_gold() -> str:
    """A gold set a judge that passes the ``JUDGEPASS`` diagnoses agrees with as
    :data:`CELLS` says."""
    lines = []
    for gold, passes, count in CELLS:
        for i in range(count):
            said = "JUDGEPASS" if passes else "JUDGEFAIL"
            diagnosis = f"user-service sets USER_PORT=9999, Service targets 8086 ({said} {i})."
            answers = {q.id: "yes" if gold == "pass" else "no" for q in sregym_rubric().questions}
            lines.append(json.dumps({
                "id": f"{gold}-{said}-{i}", "ground_truth": TRUTH, "diagnosis": diagnosis,
                "answers": answers, "verdict": gold,
            }))  # fmt: skip
    return "\n".join(lines) + "\n"


def _says_what_it_is_told(request: JudgeRequest) -> str:
    said = "\n".join(m.content for m in request.messages)
    return scripted_reply(request, yes=None if "JUDGEPASS" in said else set())


async def test_a_judge_exactly_at_the_kappa_bar_qualifies() -> None:
    """ "Verdict kappa at least the bar": a kappa of exactly 3/5, computed in floating
    point as 0.5999999999999999, reaches a bar of 0.6."""
    rubric = sregym_rubric()
    items = load_gold(_at_the_bar_gold(), rubric)
    backend = ScriptedBackend([_says_what_it_is_told] * len(items))
    results = await grade_gold(Grader(backend), rubric, items, concurrency=1)
    figures = calibration_figures(rubric, items, results)
    assert (figures.gold_fails, figures.false_passes) == (28, 1)
    assert figures.verdict_kappa == pytest.approx(0.6)
    assert qualifies(figures, min_kappa=0.6, max_false_pass=0.05)
    assert not qualifies(figures, min_kappa=0.601, max_false_pass=0.05)


def test_a_drop_of_exactly_the_threshold_is_no_drift() -> None:
    """``--drift-threshold``: "a drop of verdict kappa larger than this is drift"; a drop
    from 0.8 to 0.7 is 0.1 (0.10000000000000009 in floating point), not larger than 0.1."""
    previous, now = SimpleNamespace(verdict_kappa=0.8), SimpleNamespace(verdict_kappa=0.7)
    assert not drifted(previous, now, 0.1)
    assert drifted(previous, now, 0.099)
    assert drifted(previous, SimpleNamespace(verdict_kappa=None), 1.5)  # undefined: -1


def _calibrate(database_url: str, *args: str, **env: str) -> Any:
    import os
    from unittest import mock

    with mock.patch.dict(os.environ, env):
        return run_cli(database_url, "calibrate", "--gold", str(GOLD), "--format", "table", *args)


async def test_calibrate_stores_runs_and_marks_qualification(
    database_url: str, engine: Engine
) -> None:
    lenient = _calibrate(database_url, "--judge", "scripted:pass")
    assert lenient.returncode == 0, lenient.stderr
    assert "qualified: no" in lenient.stdout and "false passes 3 of 3" in lenient.stdout
    lowered = _calibrate(
        database_url,
        "--judge",
        "scripted:fail",
        "--format",
        "json",
        SRE_JUDGE_QUALIFY_MIN_KAPPA="-1",
        SRE_JUDGE_QUALIFY_MAX_FALSE_PASS="0",
    )
    assert lowered.returncode == 0, lowered.stderr
    out = json.loads(lowered.stdout)
    # a judge that fails everything has one verdict only: its kappa is undefined, and an
    # undefined figure never qualifies, however low the bar
    assert out["verdict_kappa"] is None and out["false_pass_rate"] == 0.0 and out["n"] == 6
    assert out["qualified"] is False
    store = Store(engine, key=session_key())
    identity = {
        "judge_settings": judge_settings(Settings()),
        "rubric_version": sregym_rubric().version,
        "asking_mode": "single",
    }
    assert not await store.calibration.is_qualified(judge_spec="scripted:fail", **identity)
    assert not await store.calibration.is_qualified(judge_spec="scripted:pass", **identity)
    assert len(await store.calibration.recent(limit=10)) == 2  # both runs stored


def test_the_calibration_table_keeps_to_an_80_column_terminal(database_url: str) -> None:
    env = {"NO_COLOR": "1", "COLUMNS": "80", "SRE_JUDGE_DATABASE_URL": database_url}
    args = ("calibrate", "--gold", str(GOLD), "--format", "table", "--judge", "scripted:pass")
    narrow = cli_in_process(*args, env=env)
    assert narrow.returncode == 0, narrow.stderr
    assert "kappa" in narrow.stdout and "Judge vs gold labels" in narrow.stdout
    table = narrow.stdout.split("\njudge ", 1)[0]  # the summary's prose wraps by itself
    too_wide = [line for line in table.splitlines() if len(line) > 80]
    assert too_wide == [], too_wide


def _earlier_run() -> CalibrationRunRecord:
    """A stored run of the same judge and gold file, when the judge was better."""
    return CalibrationRunRecord(
        judge_spec=judge_identity("scripted:pass@http://ignored:1"),
        judge_settings=judge_settings(Settings()),
        rubric_id="sregym-rca",
        rubric_version=sregym_rubric().version,
        gold_name=GOLD.name,
        gold_sha256=hashlib.sha256(GOLD.read_bytes()).hexdigest(),
        n=6,
        verdict_kappa=0.9,
        false_pass_rate=0.0,
        qualified=True,
    )


async def test_a_repeated_gold_run_reports_drift(database_url: str, engine: Engine) -> None:
    store = Store(engine, key=session_key())
    await store.calibration.add_run(_earlier_run())
    quiet = _calibrate(database_url, "--judge", "scripted:pass")
    assert quiet.returncode == 0, quiet.stderr
    # a judge that passes everything has one verdict only: its kappa is undefined, a drop
    assert "verdict kappa 0.900, now undefined - DRIFT" in quiet.stdout
    # compared with the run just before, undefined then undefined: no drop
    steady = _calibrate(database_url, "--judge", "scripted:pass", "--fail-on-drift")
    assert steady.returncode == 0, steady.stdout
    assert "DRIFT" not in steady.stdout
    await store.calibration.add_run(_earlier_run())
    failing = _calibrate(database_url, "--judge", "scripted:pass", "--fail-on-drift")
    assert failing.returncode == 1 and "DRIFT" in failing.stdout


async def _submit(client: Any, headers: dict[str, str]) -> dict[str, Any]:
    response = await client.post(
        "/v1/submissions?wait=10",
        json={"diagnosis": "user-service has USER_PORT=9999", "ground_truth": TRUTH},
        headers=headers,
    )
    assert response.status_code == 201, response.text
    return response.json()


async def test_gradings_of_an_unqualified_judge_are_provisional(
    api_client: Any, engine: Engine, tokens: Any
) -> None:
    async with api_client(provisional_review_rate=1.0) as client:
        headers = await tokens("admin")
        grading = await _submit(client, headers)
        assert grading["provisional"] is True
        assert "provisional_sample" in grading["review_reasons"]
        queue = await client.get("/v1/review-queue?reason=provisional_sample", headers=headers)
        assert grading["id"] in queue.text
        exported = await client.get("/v1/exports/gradings?format=csv", headers=headers)
        header, row = exported.text.splitlines()[:2]
        assert dict(zip(header.split(","), row.split(","), strict=False))["provisional"] == "True"
    settings = Settings(judge="scripted:pass", database_url="sqlite://")
    await Store(engine, key=session_key()).calibration.add_run(
        CalibrationRunRecord(
            judge_spec="scripted:pass",
            judge_settings=judge_settings(settings),
            rubric_id="sregym-rca",
            rubric_version=sregym_rubric().version,
            gold_name="gold.jsonl",
            gold_sha256="0" * 64,
            qualified=True,
        )
    )
    async with api_client(provisional_review_rate=1.0) as client:
        grading = await _submit(client, headers)
        assert grading["provisional"] is False
        assert "provisional_sample" not in grading["review_reasons"]


async def test_calibration_records_the_fingerprint_of_the_judge_it_measured(
    engine: Engine, database_url: str
) -> None:
    """A judge that reports no model digest (OpenAI itself) is known by the
    ``system_fingerprint`` of its completions: the calibration run records it as the
    model it measured."""
    judge = LabelledJudge()
    judge.fingerprint = "fp_a"
    settings = Settings(judge=JUDGE, database_url=database_url, judge_digest_seconds=0)
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(
            runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
        )
    assert outcome.run.qualified
    assert outcome.run.judge_digest == "fingerprint:fp_a"


async def test_a_calibration_is_stored_when_its_digest_look_up_runs_out_of_time(
    engine: Engine, database_url: str
) -> None:
    """Every item of the set is graded (judge calls paid for); the model digest look-up
    after them runs out of time. The run is stored all the same, with the digest known
    before it, as a grading goes on when its digest cannot be checked."""
    judge = DigestOutOfTime()
    settings = Settings(judge=JUDGE, database_url=database_url, judge_digest_seconds=0)
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        services = runtime.services
        known = await services.backends.digests.current(services.backends.get(JUDGE))
        judge.late = True
        outcome = await calibrate(services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name)
        rubric = services.rubrics.current[settings.rubric]
        runs = await services.store.calibration.runs(**identity_of(settings, JUDGE, rubric))
    assert known == "sha256:model-a" and judge.requests
    assert outcome.run.qualified
    assert outcome.run.judge_digest == "sha256:model-a"
    assert [run.id for run in runs] == [outcome.run.id]


async def test_a_calibration_of_a_judge_known_by_a_256_character_fingerprint_is_stored(
    engine: Engine, database_url: str
) -> None:
    """A fingerprint as long as one is kept (256 characters) makes a digest that fits the
    stored run on SQLite and PostgreSQL alike: the sha256 of the fingerprint."""
    fingerprint = "fp_" + "a" * 253
    judge = LabelledJudge()
    judge.fingerprint = fingerprint
    settings = Settings(judge=JUDGE, database_url=database_url, judge_digest_seconds=0)
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(
            runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
        )
        stored = await runtime.services.store.judge_digests.current(JUDGE)
    hashed = "fingerprint:sha256:" + hashlib.sha256(fingerprint.encode()).hexdigest()
    assert outcome.run.qualified
    assert outcome.run.judge_digest == hashed
    assert stored is not None and stored.digest == hashed


async def test_a_fingerprint_judge_updated_behind_its_name_turns_provisional(
    api_client: Any, tokens: Any, engine: Engine, database_url: str
) -> None:
    """Calibrated (``sre-judge calibrate``, a process of its own) while the cloud model
    answered with fingerprint fp_a, the judge qualifies the service's gradings; once the
    model behind the same id answers with fp_b, its gradings are provisional until a
    new calibration run measures it."""
    judge = LabelledJudge()
    judge.fingerprint = "fp_a"
    settings = Settings(judge=JUDGE, database_url=database_url, judge_digest_seconds=0)
    async with Runtime(settings, engine=engine, backends={JUDGE: judge}) as runtime:
        outcome = await calibrate(
            runtime.services, DEFAULT_GOLD.read_bytes(), gold_name=DEFAULT_GOLD.name
        )
    assert outcome.run.qualified
    async with api_client(judge=JUDGE, backends={JUDGE: judge}, judge_digest_seconds=0) as client:
        agent = await tokens("submitter")
        assert (await _submit(client, agent))["provisional"] is False
        judge.fingerprint = "fp_b"  # the cloud model updated behind its id
        await _submit(client, agent)  # the grading that sees the new fingerprint
        current = await Store(engine, key=session_key()).judge_digests.current(JUDGE)
        assert current is not None and current.digest == "fingerprint:fp_b"
        assert (await _submit(client, agent))["provisional"] is True


async def test_a_judge_calibrated_with_one_context_window_is_not_qualified_with_another(
    engine: Engine, database_url: str
) -> None:
    """The context window decides which diagnoses a judge sees whole (Ollama is sent it
    as ``num_ctx``): calibrated with ``SRE_JUDGE_JUDGE_CONTEXT_TOKENS=32768``, the same
    model sent 2048 is provisional until calibrated so; a judge given no window keeps
    the identity it had without one."""
    spec = "ollama:m@http://127.0.0.1:9"
    rubric = sregym_rubric()
    calibrated = Settings(judge=spec, database_url=database_url, judge_context_tokens=32768)
    await qualify(engine, calibrated, rubric)
    now = Settings(judge=spec, database_url=database_url, judge_context_tokens=2048)
    backend = OllamaBackend("m", base_url="http://127.0.0.1:9")
    try:
        sent = (grader_for(calibrated, backend).params, grader_for(now, backend).params)
    finally:
        await backend.aclose()
    assert (sent[0].num_ctx, sent[1].num_ctx) == (32768, 2048)
    store = Store(engine, key=session_key())
    choice = asking_choice(now, spec, rubric)
    assert await Qualifications(store, now).qualified(spec, rubric.version, choice) is False
    assert await Qualifications(store, calibrated).qualified(spec, rubric.version, choice)
    assert "context_tokens" not in judge_settings(Settings(judge=spec))


def test_the_review_sample_is_deterministic_and_near_its_rate() -> None:
    ids = [f"{i:032x}" for i in range(2000)]
    chosen = [i for i in ids if in_review_sample(i, 0.1)]
    assert chosen == [i for i in ids if in_review_sample(i, 0.1)]
    assert 150 < len(chosen) < 250
    assert not any(in_review_sample(i, 0.0) for i in ids)


async def test_calibrate_without_gold_grades_the_shipped_calibration_set(
    database_url: str, engine: Engine
) -> None:
    table = run_cli(database_url, "calibrate", "--judge", "scripted:pass", "--format", "table")
    assert table.returncode == 0, table.stderr
    sha = hashlib.sha256(DEFAULT_GOLD.read_bytes()).hexdigest()
    assert f"gold sregym-v1.jsonl (sha256 {sha[:12]})" in table.stdout
    # a judge that passes everything passes every gold fail: never qualified
    assert "qualified: no" in table.stdout and "n 73 (0 unscored)" in table.stdout
    # the canary's 24 items graded again: 24 x (9 answers and the verdict), none changed
    assert "run-to-run noise: 0 of 240 answers changed" in table.stdout
    strict = run_cli(database_url, "calibrate", "--judge", "scripted:fail", "--format", "json")
    out = json.loads(strict.stdout)
    assert (out["n"], out["gold_sha256"], out["false_passes"]) == (73, sha, 0)
    assert (out["noise"]["successes"], out["noise"]["n"]) == (0, 240)
    runs = await Store(engine, key=session_key()).calibration.runs(
        judge_spec="scripted:pass",
        judge_settings=judge_settings(Settings()),
        rubric_version=sregym_rubric().version,
        asking_mode="single",
        gold_sha256=sha,
    )
    assert [r.gold_name for r in runs] == ["sregym-v1.jsonl"]


def test_calibrate_refuses_a_gold_text_the_grader_cannot_grade_before_asking_the_judge(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A diagnosis holding a NUL is refused when the file is read, naming the line and
    the field, before the database opens and before any judge call."""
    del engine  # migrated
    items = [json.loads(raw) for raw in GOLD.read_text().splitlines() if raw.strip()]
    items[3]["diagnosis"] = "bad \x00 byte"
    gold = tmp_path / "gold.jsonl"
    gold.write_text("".join(json.dumps(item) + "\n" for item in items))
    env: dict[str, str | None] = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url}
    ran = cli_in_process("calibrate", "--gold", str(gold), "--judge", "scripted:pass", env=env)
    assert ran.returncode == 2, ran.stderr
    assert "gold.jsonl: line 4: diagnosis contains NUL bytes" in ran.stderr, ran.stderr


def test_calibrate_refuses_a_gold_number_python_cannot_read_naming_the_line(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """An item id written as a 5,000-digit number (more than Python converts) is bad gold
    like any other: exit 2 naming the file and the line."""
    del engine  # migrated
    lines = [raw for raw in GOLD.read_text().splitlines() if raw.strip()]
    first = json.loads(lines[0])
    first["id"] = "@@HUGE@@"
    lines[0] = json.dumps(first).replace('"@@HUGE@@"', "1" * 5000)
    gold = tmp_path / "gold.jsonl"
    gold.write_text("\n".join(lines) + "\n")
    env: dict[str, str | None] = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url}
    ran = cli_in_process("calibrate", "--gold", str(gold), "--judge", "scripted:pass", env=env)
    assert ran.returncode == 2, ran.stderr
    assert "gold.jsonl: line 1: " in ran.stderr, ran.stderr
    assert "unexpected" not in ran.stderr


@pytest.mark.parametrize("option", ["--judge", "--rubric"])
def test_an_empty_judge_or_rubric_is_refused_not_read_as_the_default(
    tmp_path: Path, option: str
) -> None:
    """``calibrate --judge ""`` (``--judge "$JUDGE"`` with ``JUDGE`` unset) or
    ``--rubric ""`` names nothing: bad usage naming the option before the database opens,
    not a calibration of the configured judge or rubric."""
    database = tmp_path / "judge.db"
    env: dict[str, str | None] = {
        "NO_COLOR": "1",
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{database}",
        "SRE_JUDGE_JUDGE": "scripted:pass",
    }
    given = {"--judge": "scripted:pass", "--rubric": "sregym-rca", option: ""}
    args = [part for pair in given.items() for part in pair]
    ran = cli_in_process("calibrate", "--gold", str(GOLD), "--format", "json", *args, env=env)
    assert ran.returncode == 2, ran.stdout[:200]
    assert option in ran.stderr and not ran.stdout
    assert not database.exists()
