"""A lossless SREGym round trip: import a results folder, export it, diff cell by cell.

The folder has timed-out, failed-deploy and empty attempts, TTL, TTM, ``Mitigation.*``,
SREGym's dimension names and its ``Diagnosis.reasoning``. Exported untouched, every file
comes back byte for byte; after a regrade, the only cells that differ are the verdict
columns of the regraded attempts, listed below.

Why this module is long: the round trip is one promise (what was imported comes back as
it was), and its cases share the import and the file comparison helpers.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import delete, select, update
from sqlmodel import col

from api.imports.problems import read_problems
from api.imports.queries import ImportQueries
from api.imports.sregym import read_sregym_folder
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.reports.export_writer import ExportSummary, write_export
from api.reports.filters import ReportFilter
from api.reports.sregym_roundtrip import FILE_COLUMN
from api.reports.sregym_row_reads import OriginalRowReads
from api.reports.sregym_writer import (
    write_sregym_archive,
    write_sregym_file,
    write_sregym_folder,
)
from api.sregym_archive import check_archive
from judge.rubric import load_rubric_dir
from storage import Store
from storage.engine import session_factory
from storage.imports.tables import SregymOriginalRowRecord
from storage.tables import AnswerRecord, SubmissionRecord
from tests.storage.helpers import graded_result, override, sregym_rubric
from tests.support.sregym_driver import IDS, diagnosed, oracle_result, write_run
from tests.support.sregym_results import NOT_DIAGNOSED, write_sregym_results

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

#: the rubric files' current versions, as the service reads them
CURRENT = load_rubric_dir()

#: the cells a regrade may change: SREGym's verdict columns the folder has
REGRADED_COLUMNS = {
    "Diagnosis.success",
    "Diagnosis.judgment",
    "Diagnosis.composite_score",
    "Diagnosis.accuracy",
    "Diagnosis.dimensions",
    "Diagnosis.checklist",
    "Diagnosis.reasoning",
}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}


def _cells(data: bytes) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(data.decode("utf-8"), newline="")))


def _diff(before: dict[str, bytes], after: dict[str, bytes]) -> set[tuple[str, int, str]]:
    """``(file, row, column)`` of every cell that differs; files and headers must match."""
    assert sorted(after) == sorted(before)
    changed = set()
    for path, data in before.items():
        assert after[path].splitlines()[0] == data.splitlines()[0], f"header of {path}"
        old, new = _cells(data), _cells(after[path])
        assert len(new) == len(old), path
        for number, (a, b) in enumerate(zip(old, new, strict=True)):
            changed |= {(path, number, c) for c in a if a[c] != b[c]}
    return changed


async def _imported(store: Store, tmp_path: Path) -> Path:
    fixture = write_sregym_results(tmp_path)
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root),
        read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )
    assert report.problems == [] and report.submissions == 45
    return fixture.root


async def test_an_untouched_import_exports_back_byte_for_byte(store: Store, tmp_path: Path) -> None:
    root = await _imported(store, tmp_path)
    out = tmp_path / "exported"
    assert await write_sregym_folder(store, ReportFilter(), out, current=CURRENT) == 45
    before, after = _files(root), _files(out)
    assert after == before  # every file, header, row and cell, timed-out rows included
    assert any(b"deploy_failed" in data and b",True," in data for data in after.values())


async def test_one_file_and_archives_hold_the_same_rows(store: Store, tmp_path: Path) -> None:
    root = await _imported(store, tmp_path)
    before = _files(root)
    sink = io.BytesIO()
    summary = await write_sregym_file(store, ReportFilter(), sink, current=CURRENT)
    assert isinstance(summary, ExportSummary) and summary.rows == 45
    rows = _cells(sink.getvalue())
    for path, data in before.items():
        mine = [{k: v for k, v in r.items() if k != FILE_COLUMN} for r in rows]
        expected = _cells(data)
        got = [m for m, r in zip(mine, rows, strict=True) if r[FILE_COLUMN] == path]
        assert got == expected, path
    for archive in ("tar.gz", "zip"):
        sink = io.BytesIO()
        await write_sregym_archive(store, ReportFilter(), sink, archive, current=CURRENT)  # type: ignore[arg-type]
        sink.seek(0)
        if archive == "zip":
            with zipfile.ZipFile(sink) as zipped:
                unpacked = {n: zipped.read(n) for n in zipped.namelist()}
        else:
            with tarfile.open(fileobj=sink, mode="r:gz") as tar:
                unpacked = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
        assert unpacked == before, archive


async def test_after_a_regrade_only_the_regraded_verdict_columns_differ(
    store: Store, tmp_path: Path
) -> None:
    root = await _imported(store, tmp_path)
    target = RegradeTarget(
        rubric=sregym_rubric(),
        judge_spec="openai:new-judge@http://127.0.0.1:9/v1",
        judge_backend="openai",
        judge_model="new-judge",
        mode="promote",
    )
    await RegradeJobQueries(store.db).create_job(
        RegradeFilter(agent="claude-sre"), target, actor="admin"
    )
    while claims := await store.queue.claim_pending("w", limit=50, lease_seconds=60):
        for claim in claims:
            assert await store.queue.complete(claim.grading_id, "w", graded_result())
    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    changed = _diff(_files(root), _files(out))

    regraded = {(path, row) for path, row, _ in changed}
    assert {path.split("/")[1] for path, _ in regraded} == {"claude-sre"}
    assert {column for _, _, column in changed} == REGRADED_COLUMNS
    # each of claude-sre's 14 diagnosed attempts, not its empty one
    assert len(regraded) == 15 - sum(1 for a, _, _ in NOT_DIAGNOSED if a == "claude-sre")
    # SREGym's own verdicts stay selectable: its judge's export is the original again
    original = tmp_path / "original"
    sregym_only = replace(ReportFilter(judge="external:sregym"), current_only=False)
    await write_sregym_folder(store, sregym_only, original, current=CURRENT)
    assert _files(original) == _files(root)


async def test_a_human_override_rewrites_only_that_attempts_verdict_columns(
    store: Store, tmp_path: Path
) -> None:
    root = await _imported(store, tmp_path)
    views, _ = await store.gradings.page(limit=100)
    failed = next(v for v in views if v.grading.passed is False)
    await override(store, failed.grading.id, rubric=sregym_rubric(),
        expected_revision=failed.grading.revision,
        kind="verdict", reason="the diagnosis names the fault", author_id="h1",
        author_name="Hana", verdict="pass",
    )  # fmt: skip
    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    changed = _diff(_files(root), _files(out))
    assert {(path, row) for path, row, _ in changed} == {
        (path, row) for path, row, _ in changed if failed.submission.agent in path
    }
    assert len({(path, row) for path, row, _ in changed}) == 1
    columns = {column for _, _, column in changed}
    assert "Diagnosis.success" in columns and columns <= REGRADED_COLUMNS
    [(path, row, _)] = [c for c in changed if c[2] == "Diagnosis.success"]
    assert _cells(_files(out)[path])[row]["Diagnosis.success"] == "True"


async def test_an_override_withdrawn_leaves_its_attempt_byte_for_byte(
    store: Store, tmp_path: Path
) -> None:
    """Only an override in force changes SREGym's verdict columns: withdrawn, the attempt
    is SREGym's again, and the whole folder comes back as it was imported."""
    root = await _imported(store, tmp_path)
    views, _ = await store.gradings.page(limit=100)
    failed = next(v for v in views if v.grading.passed is False)
    human = {"author_id": "h1", "author_name": "Hana"}
    verdict, grading = await override(store, failed.grading.id, rubric=sregym_rubric(),
        expected_revision=failed.grading.revision, kind="verdict", verdict="pass",
        reason="the diagnosis names the fault", **human,
    )  # fmt: skip
    await override(store, failed.grading.id, rubric=sregym_rubric(),
        expected_revision=grading.revision, kind="withdraw", withdraws=verdict.id,
        reason="I misread it", **human,
    )  # fmt: skip
    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    assert _files(out) == _files(root)


async def test_the_csv_export_of_imported_verdicts_keeps_every_answer(
    store: Store, tmp_path: Path
) -> None:
    """SREGym's verdicts are stored under a rubric version no rubric file has
    (``sregym``): their answers still get their question columns."""
    await _imported(store, tmp_path)
    sink = io.BytesIO()
    await write_export(store, ReportFilter(), "csv", sink, current=CURRENT)
    rows = _cells(sink.getvalue())
    graded = [r for r in rows if r["status"] == "graded"]
    assert graded and all(f"{q}.judge" in rows[0] for q in ("D1-Q1", "D3-Q3"))
    assert all(r["D1-Q1"] in ("yes", "no") and r["D3-Q3.judge"] in ("yes", "no") for r in graded)


async def test_a_scenario_set_export_holds_only_that_sets_attempts(
    store: Store, tmp_path: Path
) -> None:
    """``--scenario-set`` keeps the attempts of that set's scenarios alone, graded or
    never graded (timed out, failed deploy, nothing submitted)."""
    held_out = "k8s_target_port-misconfig-detection-1"
    fixture = write_sregym_results(tmp_path)
    problems = read_problems(fixture.problems_file)
    await store.catalog.create_scenario(
        id=held_out, ground_truth=problems[held_out], scenario_set="held-out", actor="admin"
    )
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), problems, rubric=sregym_rubric()
    )
    assert report.problems == [] and report.submissions == 45
    sink = io.BytesIO()
    await write_sregym_file(store, ReportFilter(scenario_set="held-out"), sink, current=CURRENT)
    rows = _cells(sink.getvalue())
    assert sorted({r["problem_id"] for r in rows}) == [held_out]
    assert len(rows) == 9  # 3 agents x 3 attempts of the held-out scenario


async def test_rows_come_in_folder_order_across_batches(store: Store, tmp_path: Path) -> None:
    await _imported(store, tmp_path)
    async with OriginalRowReads(store.db, CURRENT).open(ReportFilter(), batch=7) as export:
        seen = [(r.original.path, r.original.line) async for r in export.rows]
    assert len(seen) == len(set(seen)) == 45
    assert seen == sorted(seen)


async def test_the_rows_come_from_one_snapshot_taken_when_the_export_opens(
    store: Store, tmp_path: Path
) -> None:
    await _imported(store, tmp_path)
    async with OriginalRowReads(store.db, CURRENT).open(ReportFilter(), batch=7) as export:
        first = await anext(export.rows)
        await store.db.run(lambda session: session.execute(delete(SregymOriginalRowRecord)))
        rest = [r async for r in export.rows]
    assert len([first, *rest]) == 45
    async with OriginalRowReads(store.db, CURRENT).open(ReportFilter()) as export:
        assert [r async for r in export.rows] == []


ROUND_RUN = "2025-06-01_12-00-00"
ONE_PROBLEM = "k8s_target_port-misconfig-detection-1"
CHECKLIST = repr(
    [{"id": f"D{d}-Q{q}", "answer": "Yes", "evidence": "e", "confidence": "High"}
     for d in (1, 2, 3) for q in (1, 2, 3)]
)  # fmt: skip
RESULTS_HEADER = [
    "problem_id", "attempt", "TTL", "Diagnosis.submission", "Diagnosis.success",
    "Diagnosis.checklist", "Mitigation.success",
]  # fmt: skip


def _results_row(attempt: int, text: str = "the service targets the wrong port") -> list[str]:
    return [ONE_PROBLEM, str(attempt), "12.5", text, "True", CHECKLIST, "True"]


def _results_csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer).writerows(rows)  # as csv.DictWriter writes them: \r\n, minimal quoting
    return buffer.getvalue().encode("utf-8")


async def _one_file_round_trip(store: Store, tmp_path: Path, data: bytes) -> tuple[bytes, object]:
    root = tmp_path / "results"
    file = root / ROUND_RUN / "agent-a" / ONE_PROBLEM / "results.csv"
    file.parent.mkdir(parents=True)
    file.write_bytes(data)
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"problem_id": ONE_PROBLEM, "root_cause": "port 9999"}) + "\n")
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(root), read_problems(problems), rubric=sregym_rubric()
    )
    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    exported = out / ROUND_RUN / "agent-a" / ONE_PROBLEM / "results.csv"
    return (exported.read_bytes() if exported.exists() else b""), report


async def test_a_row_of_more_or_fewer_cells_than_its_header_is_refused_alone(
    store: Store, tmp_path: Path
) -> None:
    """SREGym's writer gives every row one cell per column; a longer row was imported and
    its extra cells dropped from the export (a shorter one came back with empty cells):
    now refused, naming its line, the file's other rows coming back byte for byte."""
    good = [RESULTS_HEADER, _results_row(1)]
    long = [*_results_row(2), "extra-cell-1", "extra-cell-2"]
    short = _results_row(3)[:-1]
    exported, report = await _one_file_round_trip(
        store, tmp_path, _results_csv([*good, long, short])
    )
    assert report.submissions == 1  # type: ignore[attr-defined]
    assert [(p.where.rsplit(":", 1)[-1], p.message) for p in report.problems] == [  # type: ignore[attr-defined]
        ("3", "the row has 9 cells, its header 7 columns"),
        ("4", "the row has 6 cells, its header 7 columns"),
    ]
    assert exported == _results_csv(good)


async def test_a_header_naming_one_column_twice_is_refused(store: Store, tmp_path: Path) -> None:
    """Its rows were imported with one of the two cells, the other written twice in the
    export. The file is refused whole, naming the column."""
    data = _results_csv([[*RESULTS_HEADER, "notes", "notes"], [*_results_row(1), "a", "b"]])
    exported, report = await _one_file_round_trip(store, tmp_path, data)
    assert report.submissions == 0 and exported == b""  # type: ignore[attr-defined]
    [problem] = report.problems  # type: ignore[attr-defined]
    assert problem.message == "the header names notes more than once"


async def test_a_byte_order_mark_is_read_past_and_not_written_back(
    store: Store, tmp_path: Path
) -> None:
    """SREGym's writer writes none; a file another tool saved with one is read, and its
    rows come back byte for byte without it (as the docs say)."""
    data = _results_csv([RESULTS_HEADER, _results_row(1)])
    exported, report = await _one_file_round_trip(store, tmp_path, b"\xef\xbb\xbf" + data)
    assert report.problems == [] and exported == data  # type: ignore[attr-defined]


async def test_a_header_cell_with_a_line_break_keeps_the_one_file_export_whole(
    store: Store, tmp_path: Path
) -> None:
    """A column name holding a quoted CRLF (any CSV reader takes it) is written once, in
    the header: the one-file export parses to the imported rows, each under it."""
    odd = "Mitigation.note\r\nforged"
    fixture = write_sregym_results(tmp_path)
    target = sorted(fixture.root.rglob("*.csv"))[0]
    with target.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    with target.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=[*rows[0].keys(), odd])
        writer.writeheader()
        writer.writerows({**row, odd: "kept"} for row in rows)
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root), read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )  # fmt: skip
    assert report.problems == []
    sink = io.BytesIO()
    summary = await write_sregym_file(store, ReportFilter(), sink, current=CURRENT)
    exported = list(csv.DictReader(io.StringIO(sink.getvalue().decode("utf-8"), newline="")))
    assert len(exported) == summary.rows == report.submissions
    mine = [r for r in exported if r[FILE_COLUMN] == target.relative_to(fixture.root).as_posix()]
    assert mine and all(r[odd] == "kept" for r in mine)
    assert all(r["problem_id"] and not r["problem_id"].startswith("forged") for r in exported)


async def test_regraded_dimension_scores_are_rounded_as_sregyms_judge_writes_them(
    store: Store, tmp_path: Path
) -> None:
    """Seven yes (D1 2/3, D2 3/3, D3 2/3): ``Diagnosis.dimensions`` reads 0.67, 1.0,
    0.67 as SREGym's judge writes it (``round(yes / total, 2)``), whichever judge filled it."""
    root = await _imported(store, tmp_path)
    target = RegradeTarget(
        rubric=sregym_rubric(), judge_spec="openai:new-judge@http://127.0.0.1:9/v1",
        judge_backend="openai", judge_model="new-judge", mode="promote",
    )  # fmt: skip
    await RegradeJobQueries(store.db).create_job(
        RegradeFilter(agent="claude-sre"), target, actor="admin"
    )
    seven = ["D1-Q1", "D1-Q2", "D2-Q1", "D2-Q2", "D2-Q3", "D3-Q1", "D3-Q3"]
    while claims := await store.queue.claim_pending("w", limit=50, lease_seconds=60):
        for claim in claims:
            assert await store.queue.complete(claim.grading_id, "w", graded_result(seven))
    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    changed = {(path, row) for path, row, column in _diff(_files(root), _files(out))}
    path, row = sorted(changed)[0]
    dimensions = ast.literal_eval(_cells(_files(out)[path])[row]["Diagnosis.dimensions"])
    assert [d["score"] for d in dimensions.values()] == [0.67, 1.0, 0.67]


async def test_every_file_sregym_wrote_comes_back_byte_for_byte(
    store: Store, tmp_path: Path
) -> None:
    """SREGym's driver writes each attempt in several files (alone in
    ``run_<n>/<pid>_results.csv``, with the problem's other attempts in
    ``<pid>_<agent>_results.csv``, with every row in ``<agent>_ALL_results.csv``): an
    untouched import exports every one of those files byte for byte."""
    problem = "k8s_target_port-misconfig-detection-1"
    truth = "[fault_spec] component=service/user-service || targets port 9999, not 9090."
    results = tmp_path / "results"
    write_run(
        results,
        "stratus",
        {problem: [diagnosed("user-service port 9999", set(IDS)), diagnosed("drift", set())]},
    )
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(results), {problem: truth}, rubric=sregym_rubric()
    )
    assert report.problems == [] and report.conflicts == []
    assert (report.submissions, report.already_imported) == (2, 4)
    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    before, after = _files(results), _files(out)
    assert sorted(after) == sorted(before)
    assert after == before


async def _imported_run(store: Store, results: Path, run: str) -> None:
    """One diagnosed attempt of :data:`ONE_PROBLEM` in the run folder ``run`` under
    ``results`` (in the three files SREGym's driver writes), imported by the command
    line's reader."""
    attempt = diagnosed("user-service port 9999", set(IDS))
    write_run(results, "stratus", {ONE_PROBLEM: [attempt]}, run=run)
    truth = "[fault_spec] component=service/user-service || targets port 9999, not 9090."
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(results), {ONE_PROBLEM: truth}, rubric=sregym_rubric()
    )
    assert report.problems == [] and report.submissions == 1, report.problems


async def test_a_run_folder_named_by_its_time_exports_back_as_imported(
    store: Store, tmp_path: Path
) -> None:
    """A run folder named by an ISO time (``2025-06-01T12:00:00``, a legal name on Linux
    and macOS) is imported and exported back, as a folder and as an archive, at its
    path; the archive is one ``POST /v1/imports`` takes again."""
    results = tmp_path / "results"
    await _imported_run(store, results, "2025-06-01T12:00:00")
    out = tmp_path / "exported"
    assert await write_sregym_folder(store, ReportFilter(), out, current=CURRENT) == 1
    assert _files(out) == _files(results)
    sink = io.BytesIO()
    await write_sregym_archive(store, ReportFilter(), sink, "tar.gz", current=CURRENT)
    assert check_archive(sink.getvalue(), "tar.gz") == len(_files(results))


async def test_a_kept_path_the_import_refuses_leaves_its_file_out_not_the_export(
    store: Store, tmp_path: Path
) -> None:
    """A row kept under a path the import now refuses (a drive, ``C:``, as its run folder,
    stored by a version that did not check it) cannot be written back there: its file is
    left out of the folder and the archive, and every other file is exported."""
    await _imported_run(store, tmp_path / "results", ROUND_RUN)
    o = SregymOriginalRowRecord
    legacy = col(o.path).startswith(f"{ROUND_RUN}/stratus/{ONE_PROBLEM}/run_")
    moved = update(o).where(legacy).values(path=f"C:/stratus/{ONE_PROBLEM}/results.csv")
    await store.db.run(lambda session: session.execute(moved))
    out = tmp_path / "exported"
    assert await write_sregym_folder(store, ReportFilter(), out, current=CURRENT) == 1
    kept = sorted(_files(out))
    assert kept and all(p.startswith(f"{ROUND_RUN}/") for p in kept), kept
    sink = io.BytesIO()
    await write_sregym_archive(store, ReportFilter(), sink, "zip", current=CURRENT)
    with zipfile.ZipFile(sink) as zipped:
        assert sorted(zipped.namelist()) == kept


#: an agent and a problem id whose attempt's own file lies 1,042 bytes from the run
#: folder on, every folder or file name within 255 bytes: a results folder on disk holds it
DEEP_AGENT, DEEP_PROBLEM = "智" * 84, "/".join(("故" * 42, "障" * 42, "码" * 42))


def _deep_attempt(results: Path) -> dict[str, bytes]:
    """One attempt of :data:`DEEP_PROBLEM` in its own file (``run_1/<pid>_results.csv``,
    past 1,024 bytes from the run folder on) and in a ``results.csv`` in the problem's
    folder (within them); the files by path."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["problem_id", "attempt", "Diagnosis.submission", "Diagnosis.success",
                     "Diagnosis.checklist"])  # fmt: skip
    checklist = repr([{"id": q, "answer": "Yes"} for q in IDS])
    writer.writerow([DEEP_PROBLEM, "1", "the geo pod restarts", "True", checklist])
    folder = results / ROUND_RUN / DEEP_AGENT / DEEP_PROBLEM
    for path in (folder / "run_1" / f"{DEEP_PROBLEM}_results.csv", folder / "results.csv"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(buffer.getvalue(), newline="")
    return _files(results)


async def test_a_path_an_upload_refuses_leaves_its_file_out_of_an_export_that_can_be_uploaded(
    store: Store, tmp_path: Path
) -> None:
    """A results folder on disk whose attempt's own file lies past 1,024 bytes from the
    run folder on is imported whole (the limit is an upload's only); the folder and the
    archives exported leave that file out, so an archive is one ``POST /v1/imports``
    takes again, and the attempt comes back in its other file."""
    written = _deep_attempt(tmp_path / "results")
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(tmp_path / "results"),
        {DEEP_PROBLEM: "the geo pod"},
        rubric=sregym_rubric(),
    )
    assert (report.submissions, report.already_imported, report.problems) == (1, 1, [])
    within = {p: data for p, data in written.items() if len(p.encode()) <= 1024}
    assert sorted(within) == [f"{ROUND_RUN}/{DEEP_AGENT}/{DEEP_PROBLEM}/results.csv"]
    out = tmp_path / "exported"
    assert await write_sregym_folder(store, ReportFilter(), out, current=CURRENT) == 1
    assert _files(out) == within
    for archive in ("tar.gz", "zip"):
        sink = io.BytesIO()
        summary = await write_sregym_archive(store, ReportFilter(), sink, archive, current=CURRENT)
        assert summary.rows == 1
        assert check_archive(sink.getvalue(), archive) == 1


#: an AWS access key id (AWS's documented example), in two parts so no scanner takes it
KEY = "AKIA" + "IOSFODNN7EXAMPLE"
#: the columns of a row that quote the key below: written back redacted
QUOTING_COLUMNS = {"Diagnosis.submission", "Diagnosis.checklist", "Diagnosis.reasoning"}


async def test_a_credential_in_a_diagnosis_is_kept_and_written_back_redacted(
    store: Store, tmp_path: Path
) -> None:
    """A credential an agent pasted into its diagnosis, quoted by SREGym's judge in its
    checklist and reasoning, is stored and exported redacted (in the submission, SREGym's
    checklist text and answers, every cell kept for the round trip); every other cell
    comes back byte for byte. Imported again, the folder is the same attempt, also where
    its rows were kept in clear."""
    problem = "k8s_target_port-misconfig-detection-1"
    truth = "[fault_spec] component=service/user-service || targets port 9999, not 9090."
    text = f"user-service targets port 9999; the pod uses aws_access_key_id={KEY} for S3"
    attempt = diagnosed(text, set(IDS))
    quoted = oracle_result(set(IDS), evidence=f"the pod uses aws_access_key_id={KEY}")
    attempt["Diagnosis"] = {**quoted, "submission": text}
    results = tmp_path / "results"
    write_run(results, "stratus", {problem: [attempt]}, all_file=False)
    queries = ImportQueries(store.db, store.catalog)
    report = await queries.sregym(
        read_sregym_folder(results), {problem: truth}, rubric=sregym_rubric()
    )
    assert report.problems == [] and report.submissions == 1
    with session_factory(store.db.engine)() as session:
        submission = session.execute(select(SubmissionRecord)).scalar_one()
        evidence = list(session.execute(select(col(AnswerRecord.evidence))).scalars())
        kept = list(session.execute(select(SregymOriginalRowRecord)).scalars())
    assert KEY not in submission.diagnosis and KEY not in json.dumps(submission.metadata_)
    assert len(evidence) == 9 and all("[REDACTED:" in e and KEY not in e for e in evidence)
    assert len(kept) == 2
    for row in kept:
        assert all(KEY not in (cell or "") for cell in row.cells.values())
        assert all("[REDACTED:" in row.cells[column] for column in QUOTING_COLUMNS)

    out = tmp_path / "exported"
    await write_sregym_folder(store, ReportFilter(), out, current=CURRENT)
    assert all(KEY.encode() not in data for data in _files(out).values())
    assert {column for _, _, column in _diff(_files(results), _files(out))} == QUOTING_COLUMNS
    sink = io.BytesIO()
    await write_sregym_file(store, ReportFilter(), sink, current=CURRENT)
    assert KEY.encode() not in sink.getvalue()

    clear = _cells(_files(results)[kept[0].path])[0]
    await store.db.run(
        lambda session: session.execute(
            update(SregymOriginalRowRecord).values(
                cells={**kept[0].cells, **{c: clear[c] for c in QUOTING_COLUMNS}}
            )
        )
    )
    again = await queries.sregym(
        read_sregym_folder(results), {problem: truth}, rubric=sregym_rubric()
    )
    assert again.conflicts == [] and again.already_imported == 2
