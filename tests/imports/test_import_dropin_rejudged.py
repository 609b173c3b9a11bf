"""SREGym rows without an attempt number on a line an attempt was imported at: which
cells make the row another attempt.

A row with the same cells but its judge's result is that attempt, a conflict: the
judge's result is every ``Diagnosis.<key>`` SREGym writes of the oracle's dictionary
(the client's drop-in oracle's own keys, ``error``, ``scenario_version`` and
``ground_truth_sha256``, beside SREGym's seven), the agent's diagnosis and trace aside;
another cell of the agent's (its trace, in ``trace`` or ``Diagnosis.trace``) makes it
another attempt.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sre_judge_client import Grading
from sre_judge_client.sregym import oracle_result

from api.imports.queries import ImportQueries
from api.imports.report import ImportReport
from api.imports.sregym import read_sregym_folder
from storage import Store, SubmissionRecord
from storage.engine import session_factory
from tests.storage.helpers import sregym_rubric
from tests.support.sregym_driver import RUN, write_run
from tests.support.submissions import DIAGNOSIS, IDS, TRUTH

P1 = "misconfig_app_hotel_res-detection-1"
P2 = "misconfig_app_hotel_res-localization-1"


def _grading(*, status: str, version: int, sha: str) -> Grading:
    """A grading of this service's as a token that sees it in full reads it."""
    body: dict[str, Any] = {
        "id": str(uuid.uuid4()), "submission_id": uuid.uuid4().hex, "status": status,
        "unscored_reason": "judge_unreachable" if status == "unscored" else None,
        "rubric": {"id": "sregym-rca"}, "judge": {"backend": "openai"},
        "passed": True if status == "graded" else None, "revision": 1, "view": "full",
        "withheld": [], "composite": 1.0 if status == "graded" else None,
        "yes_count": 9 if status == "graded" else None,
        "answers": [
            {"question_id": q, "dimension_id": q[:2], "answer": "yes", "judge_answer": "yes",
             "evidence": "USER_PORT=9999", "confidence": 0.9}
            for q in IDS
        ] if status == "graded" else [],
        "dimensions": [{"id": d, "name": d, "yes": 3, "total": 3} for d in ("D1", "D2", "D3")]
        if status == "graded" else [],
        "scenario_version": version,
        "created_at": "2026-12-01T00:00:00Z", "graded_at": "2026-12-01T00:00:01Z",
        "submission": {"id": "s1", "agent": None, "model": None, "scenario_id": P1,
                       "run_id": None, "attempt": 1, "metadata": {}, "diagnosis": DIAGNOSIS,
                       "ground_truth": None, "ground_truth_sha256": sha,
                       "scenario_version": version, "created_at": "2026-12-01T00:00:00Z"},
    }  # fmt: skip
    return Grading.model_validate(body)


def _one_row(root: Path, result: dict[str, Any]) -> Path:
    """The attempt's own file as SREGym's driver writes it for the drop-in's ``result``,
    its ``attempt`` column left out (a row that names no attempt), the other two files
    removed; ``root``."""
    write_run(root, "stratus", {P1: [{"Diagnosis": {**result, "submission": DIAGNOSIS},
                                      "TTL": 12.5}]})  # fmt: skip
    base = root / RUN
    own = base / "stratus" / P1 / "run_1" / f"{P1}_results.csv"
    rows = list(csv.DictReader(io.StringIO(own.read_text())))
    for path in base.rglob("*.csv"):
        path.unlink()
    columns = [c for c in rows[0] if c != "attempt"]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    target = base / "stratus" / P1 / "results.csv"
    target.write_text(buffer.getvalue(), newline="")
    shutil.rmtree(base / "stratus" / P1 / "run_1")
    return root


async def _import(store: Store, root: Path) -> ImportReport:
    return await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(root), {P1: TRUTH, P2: TRUTH}, rubric=sregym_rubric()
    )


def _submissions(engine: Engine) -> list[SubmissionRecord]:
    with session_factory(engine)() as session:
        return list(session.execute(select(SubmissionRecord)).scalars())


async def test_the_dropins_judge_run_again_after_an_error_is_a_conflict_not_a_second_attempt(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """The attempt's grading was unscored (the drop-in's error shape, ``Diagnosis.error``
    filled), then the judge run again gave a verdict: the same line, problem and
    diagnosis, only the judge's columns differ, so it is that attempt, in conflict,
    stored once (pass rates count it once)."""
    sha = "a" * 64
    first = _one_row(
        tmp_path / "first", oracle_result(_grading(status="unscored", version=1, sha=sha))
    )
    again = _one_row(
        tmp_path / "again", oracle_result(_grading(status="graded", version=1, sha=sha))
    )
    assert (await _import(store, first)).submissions == 1
    report = await _import(store, again)
    assert len(_submissions(engine)) == 1, report
    assert (report.submissions, len(report.conflicts)) == (0, 1), report


async def test_the_dropins_judge_run_again_on_an_edited_scenario_is_a_conflict(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """The drop-in's verdict judged again after the scenario's ground truth was edited:
    another verdict and the drop-in's ``Diagnosis.scenario_version`` and
    ``Diagnosis.ground_truth_sha256`` of the new version: the same attempt, a conflict."""
    failed = _grading(status="graded", version=1, sha="a" * 64)
    failed = failed.model_copy(update={"passed": False})
    first = _one_row(tmp_path / "first", oracle_result(failed))
    again = _one_row(
        tmp_path / "again", oracle_result(_grading(status="graded", version=2, sha="b" * 64))
    )
    assert (await _import(store, first)).submissions == 1
    report = await _import(store, again)
    assert len(_submissions(engine)) == 1, report
    assert (report.submissions, len(report.conflicts)) == (0, 1), report


def _attempts(results: Path, column: str, *traces: str) -> Path:
    """A file of P2's rows that name no attempt, each with DIAGNOSIS and SREGym's pass,
    the same TTL, and one of ``traces`` in the trace ``column``; ``results``."""
    folder = results / RUN / "stratus" / P2
    folder.mkdir(parents=True)
    checklist = repr([{"id": q, "answer": "Yes"} for q in IDS])
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["Diagnosis.checklist", "Diagnosis.submission", "Diagnosis.success",
                     column, "TTL", "problem_id"])  # fmt: skip
    for trace in traces:
        steps = json.dumps([{"role": "tool", "content": trace}])
        writer.writerow([checklist, DIAGNOSIS, "True", steps, "50.0", P2])
    (folder / "results.csv").write_text(buffer.getvalue(), newline="")
    return results


@pytest.mark.parametrize("column", ["trace", "Diagnosis.trace"])
async def test_attempts_diagnosed_alike_with_other_traces_are_each_stored(
    store: Store, engine: Engine, tmp_path: Path, column: str
) -> None:
    """Two attempts of one problem that name no attempt number, with the same diagnosis,
    verdict and TTL but another agent's trace: a file filtered to the second holds its
    row on the line the first has in the whole file. Imported first, then the whole
    file: the first row is another attempt (another cell besides the verdict's: the
    submission's trace), not a conflict; each is stored once, whichever column SREGym
    wrote the trace in."""
    filtered = _attempts(tmp_path / "filtered", column, "kubectl get pods -n hotel (second)")
    whole = _attempts(
        tmp_path / "whole", column, "kubectl logs user-service (first)",
        "kubectl get pods -n hotel (second)",
    )  # fmt: skip
    first = await _import(store, filtered)
    assert (first.submissions, first.conflicts, first.problems) == (1, [], [])
    again = await _import(store, whole)
    assert (again.conflicts, again.problems) == ([], []), again.conflicts
    assert (again.submissions, again.already_imported) == (1, 1)
    assert len(_submissions(engine)) == 2
