"""SREGym results with the agents' traces: each attempt's trace is imported with it (JSON
steps, a Python repr of steps, or free text), its credentials redacted, and a trace over
the size limit refuses its row alone, naming the column."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from api.imports.problems import ImportProblem, read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import SregymAttempt, read_sregym_folder
from storage import Store, SubmissionRecord
from storage.imports.tables import SregymOriginalRowRecord
from tests.storage.helpers import sregym_rubric
from tests.support.sregym_results import TRACE_SECRET, SregymFixture, write_sregym_results

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def test_traces_are_imported_with_their_attempts_redacted(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    fixture = write_sregym_results(tmp_path, traces=True)
    problems = read_problems(fixture.problems_file)
    queries, rubric = ImportQueries(store.db, store.catalog), sregym_rubric()
    report = await queries.sregym(read_sregym_folder(fixture.root), problems, rubric=rubric)
    assert report.problems == [] and report.submissions == 45
    again = await queries.sregym(read_sregym_folder(fixture.root), problems, rubric=rubric)
    assert again.submissions == 0 and again.problems == []  # the same rows: nothing twice
    with engine.connect() as connection:
        rows = connection.execute(select(SubmissionRecord.agent, SubmissionRecord.trace)).all()
        cells = connection.execute(select(SregymOriginalRowRecord.cells)).scalars().all()
    traces = {agent: trace for agent, trace in rows}
    assert len(rows) == 45
    for agent in ("stratus", "react-baseline"):  # JSON steps, and SREGym's Python repr
        steps = traces[agent]
        assert isinstance(steps, list) and steps[0]["tool"] == "kubectl_get"
        assert steps[0]["input"] == {"args": ["pods", "-A"]}
        assert "[REDACTED:" in steps[1]["output"]
    assert isinstance(traces["claude-sre"], str) and "kubectl get pods" in traces["claude-sre"]
    assert all(TRACE_SECRET not in json.dumps(trace) for _, trace in rows)
    assert cells and all(TRACE_SECRET not in json.dumps(c) for c in cells)  # kept for export


def _with_first_row(tmp_path: Path, cells: dict[str, str]) -> SregymFixture:
    """Results with traces whose first file's first row has ``cells``."""
    fixture = write_sregym_results(tmp_path, traces=True)
    [first, *_] = sorted(fixture.root.rglob("*.csv"))
    with first.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[0].update(cells)
    with first.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return fixture


def _with_first_trace(tmp_path: Path, trace: str) -> Path:
    """A results folder with traces whose first file's first row has ``trace``."""
    return _with_first_row(tmp_path, {"trace": trace}).root


def test_a_trace_over_the_limit_refuses_its_row_naming_the_column(tmp_path: Path) -> None:
    read = list(read_sregym_folder(_with_first_trace(tmp_path, "x" * 5000), max_bytes=4096))
    [refused] = [r for r in read if isinstance(r, ImportProblem)]
    assert refused.field == "trace" and "4096" in refused.message
    assert sum(isinstance(r, SregymAttempt) for r in read) == 44


def test_a_repr_trace_with_a_tuple_key_is_read_with_its_row(tmp_path: Path) -> None:
    """A Python-repr trace whose dict has a key JSON cannot hold (a tuple) is imported
    with its row, the key as its text, and the folder's other rows are read on."""
    trace = "[{'tool': 'kubectl_top', 'output': {('user-service', 'cpu'): '950m'}}]"
    read = list(read_sregym_folder(_with_first_trace(tmp_path, trace)))
    attempts = [r for r in read if isinstance(r, SregymAttempt)]
    assert len(attempts) == 45, [r for r in read if isinstance(r, ImportProblem)]
    [steps] = [a.trace for a in attempts if "kubectl_top" in json.dumps(a.trace)]
    assert steps == [{"tool": "kubectl_top", "output": {"('user-service', 'cpu')": "950m"}}]


@pytest.mark.parametrize(("size", "max_bytes"), [(200_000, 65_536), (200_000, 1_048_576)])
def test_a_trace_past_the_csv_module_s_cell_limit_is_judged_by_the_service_s_limit(
    tmp_path: Path, size: int, max_bytes: int
) -> None:
    """Python's csv module stops at 128 KiB a cell: such a trace refused the rest of its
    file. It is refused alone when over the text limit, and imported when within it."""
    fixture = write_sregym_results(tmp_path, traces=True)
    [three] = [p for p in sorted(fixture.root.rglob("*.csv")) if "react-baseline" in str(p)][:1]
    with three.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 3
    rows[1]["trace"] = "kubectl get pods -n hotel " * (size // 26)
    with three.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    read = list(read_sregym_folder(fixture.root, max_bytes=max_bytes))
    refused = [r for r in read if isinstance(r, ImportProblem)]
    attempts = [r for r in read if isinstance(r, SregymAttempt)]
    if size > max_bytes:
        [problem] = refused
        assert problem.field == "trace" and str(max_bytes) in problem.message, problem
        assert len(attempts) == 44
    else:
        assert refused == [] and len(attempts) == 45
        [long] = [a for a in attempts if isinstance(a.trace, str) and len(a.trace) > 131_072]
        assert isinstance(long.trace, str) and long.trace.startswith("kubectl get pods")


def test_rows_without_a_trace_read_as_before(tmp_path: Path) -> None:
    fixture = write_sregym_results(tmp_path)
    attempts = [a for a in read_sregym_folder(fixture.root) if isinstance(a, SregymAttempt)]
    assert len(attempts) == 45 and {a.trace for a in attempts} == {None}


async def test_a_password_in_a_rows_trace_is_stored_in_clear_nowhere(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A credential found in an attempt's trace is redacted in its diagnosis too, as in
    a submission's, and in the row kept for export: stored in clear nowhere."""
    password = "Zx81pq77wQ"
    steps = [{"tool": "exec", "input": "env", "output": f"DB_PASSWORD={password}"}]
    fixture = _with_first_row(
        tmp_path,
        {
            "trace": json.dumps(steps),
            "Diagnosis.submission": f"checkout cannot log in to MongoDB with {password}",
        },
    )
    problems = read_problems(fixture.problems_file)
    queries = ImportQueries(store.db, store.catalog)
    report = await queries.sregym(
        read_sregym_folder(fixture.root), problems, rubric=sregym_rubric()
    )
    assert report.problems == [] and report.submissions == 45
    with engine.connect() as connection:
        diagnoses = connection.execute(select(SubmissionRecord.diagnosis)).scalars().all()
        cells = connection.execute(select(SregymOriginalRowRecord.cells)).scalars().all()
    assert "checkout cannot log in to MongoDB with [REDACTED:secret-keyword]" in diagnoses
    assert all(password not in d for d in diagnoses)
    assert all(password not in json.dumps(c) for c in cells)


async def test_a_password_in_a_rows_diagnosis_is_redacted_in_its_trace(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A credential an attempt's diagnosis shows is redacted in its trace too, and in the
    row kept for export (its trace and reasoning cells): stored in clear nowhere, and
    importing the folder again stores nothing twice."""
    password = "Zx81pq77wQ"
    steps = [{"tool": "exec", "input": f"mongo -u admin -p {password} --eval 1", "output": "x"}]
    fixture = _with_first_row(
        tmp_path,
        {
            "trace": json.dumps(steps),
            "Diagnosis.submission": f"user-service sets DB_PASSWORD={password}.",
            "Diagnosis.reasoning": f"the agent logged in with {password} and failed",
        },
    )
    problems = read_problems(fixture.problems_file)
    queries, rubric = ImportQueries(store.db, store.catalog), sregym_rubric()
    report = await queries.sregym(read_sregym_folder(fixture.root), problems, rubric=rubric)
    assert report.problems == [] and report.submissions == 45
    again = await queries.sregym(read_sregym_folder(fixture.root), problems, rubric=rubric)
    assert again.submissions == 0 and again.problems == []
    with engine.connect() as connection:
        traces = connection.execute(select(SubmissionRecord.trace)).scalars().all()
        cells = connection.execute(select(SregymOriginalRowRecord.cells)).scalars().all()
    assert all(password not in json.dumps(trace) for trace in traces)
    assert any("-p [REDACTED:secret-keyword] --eval" in json.dumps(t) for t in traces)
    assert all(password not in json.dumps(c) for c in cells)
