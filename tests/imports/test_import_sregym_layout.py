"""Importing results folders laid out as SREGym's driver writes them.

SREGym writes each attempt three times: alone in
``<agent>/<pid>/run_<n>/<pid>_results.csv``, in ``<agent>/<pid>/<pid>_<agent>_results.csv``
(every row of the agent so far: the rows of the problems run before it too) and in
``<agent>_ALL_results.csv`` at the top of the run folder. Each attempt is one submission
of the agent and run of its file, whichever files it is read from, each file kept at its
path from the run folder, whatever folders the results were packed under (and a row
without an attempt number keyed by that path and its line); an export imported again
stores no row twice, also where it left a row out of a file (and a filtered export then
the whole results export every file in its order); an attempt judged and then
timed out keeps SREGym's verdict; SREGym's default checklist for a judge
reply it could not parse is an unscored grading, not a failed diagnosis. An attempt's
own file is read first (a resumed run keeps the attempt it made), a diagnosis reading
``None`` is a diagnosis, and an agent's own CSV log is no results file. A problem whose
id ends in ``_ALL`` is no agent's ``_ALL_results.csv``, and a folder named ``*.csv`` is
no CSV file.
"""

from __future__ import annotations

import csv
import io
import shutil
from pathlib import Path

import pytest
from sqlalchemy import literal, select, update
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.imports import rows
from api.imports.queries import ImportQueries
from api.imports.report import ImportReport
from api.imports.sregym import SregymAttempt, read_sregym_folder, sregym_outline
from api.regrade.job_queries import RegradeJobQueries, RegradeTarget
from api.regrade.selection import RegradeFilter
from api.reports.filters import ReportFilter
from api.reports.sregym_writer import write_sregym_folder
from judge.rubric import load_rubric_dir
from storage import Store, SubmissionRecord
from storage.engine import make_engine, session_factory
from storage.imports.tables import SregymOriginalRowRecord
from storage.keys import ServiceKey
from storage.tables import GradingRecord
from tests.conftest import Clock
from tests.storage.helpers import graded_result, override, sregym_rubric
from tests.support.sregym_driver import IDS, RUN, diagnosed, parse_failure_result, write_run

#: the engine matters here (one submission per attempt met in several files)
pytestmark = pytest.mark.postgres

P1 = "k8s_target_port-misconfig-detection-1"
P2 = "misconfig_app_hotel_res-localization-1"
P3 = "revoke_auth_mongodb-detection-1"
PROBLEMS = {
    P1: "[fault_spec] component=service/user-service; namespace=social-network || "
    "The user-service Service targets port 9999 while its pods listen on 9090.",
    P2: "[fault_spec] component=deployment/geo; namespace=hotel-reservation || "
    "The geo deployment runs a wrong image tag that crashes at start.",
    P3: "[fault_spec] component=deployment/mongodb-geo; namespace=hotel-reservation || "
    "The admin user's roles on mongodb-geo were revoked.",
}


def _submissions(engine: Engine) -> list[SubmissionRecord]:
    with session_factory(engine)() as session:
        return list(session.execute(select(SubmissionRecord)).scalars())


def _kept_paths(engine: Engine) -> list[str]:
    """The paths of the CSV rows kept for export, one per row."""
    with session_factory(engine)() as session:
        o = SregymOriginalRowRecord
        query = select(col(o.path)).order_by(col(o.path))
        return list(session.execute(query).scalars())


def _gradings(engine: Engine) -> list[GradingRecord]:
    with session_factory(engine)() as session:
        return list(session.execute(select(GradingRecord)).scalars())


async def _import(store: Store, root: Path) -> ImportReport:
    return await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(root), PROBLEMS, rubric=sregym_rubric()
    )


async def test_rows_of_earlier_problems_in_a_later_problems_csv_keep_their_agent(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """One agent runs two problems once each: two submissions, both of agent ``stratus``
    in run ``0601_1200``, whichever of SREGym's files each row is read from. P1's rows
    in P2's file and in ``stratus_ALL_results.csv`` are the same attempt, already
    imported, not attempts of agents named after P2's folder or the run folder."""
    results = tmp_path / "results"
    write_run(
        results,
        "stratus",
        {
            P1: [diagnosed("user-service targets port 9999 instead of 9090", set(IDS))],
            P2: [diagnosed("geo crashes: wrong image tag", set(IDS[:4]))],
        },
    )
    report = await _import(store, results)
    assert report.problems == [] and report.conflicts == [], report.problems
    assert (report.submissions, report.already_imported) == (2, 5)  # of 7 rows
    stored = _submissions(engine)
    seen = sorted(((s.run_id, s.agent, s.scenario_id, s.attempt) for s in stored), key=repr)
    assert seen == [(RUN, "stratus", P1, 1), (RUN, "stratus", P2, 1)], seen


async def test_an_attempt_that_diagnosed_then_timed_out_keeps_sregyms_verdict(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """An attempt that submitted its diagnosis, was judged (``Diagnosis.success`` True, a
    full checklist) and then timed out mitigating is a diagnosed attempt with SREGym's
    grading (graded, passed); its ``timed_out`` is kept in the submission's metadata."""
    results = tmp_path / "results"
    timed_out = {
        **diagnosed("user-service targets port 9999 instead of 9090", set(IDS), mitigated=None),
        "timed_out": True,
        "agent_timeout_seconds": 1800,
    }
    write_run(results, "stratus", {P1: [timed_out]})
    report = await _import(store, results)
    assert report.problems == []
    [submission] = [s for s in _submissions(engine) if s.agent == "stratus"]
    assert submission.diagnosis.startswith("user-service targets port 9999")
    metadata = submission.metadata_ or {}
    assert metadata["import_outcome"] == "diagnosed"
    assert metadata["sregym"]["timed_out"] is True
    gradings = [g for g in _gradings(engine) if g.submission_id == submission.id]
    assert [(g.judge_spec, g.status, g.passed) for g in gradings] == [
        ("external:sregym", "graded", True)
    ]


async def test_sregyms_parse_failure_default_is_not_imported_as_a_failed_diagnosis(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """An attempt whose checklist is SREGym's default for a judge reply it could not parse
    (nine "No", evidence "parse failure — defaulting to No", Low) gets an unscored
    SREGym grading with the reason ``sregym_judge_parse_failure``: no pass, no fail."""
    results = tmp_path / "results"
    row = diagnosed("user-service targets port 9999 instead of 9090", set())
    row["Diagnosis"] = {**parse_failure_result(), "submission": row["Diagnosis"]["submission"]}
    write_run(results, "stratus", {P1: [row]}, all_file=False)
    report = await _import(store, results)
    assert report.problems == []
    [grading] = _gradings(engine)
    assert (grading.judge_spec, grading.status, grading.passed) == (
        "external:sregym",
        "unscored",
        None,
    )
    assert grading.unscored_reason == "sregym_judge_parse_failure"


async def test_a_real_all_no_verdict_is_still_a_graded_fail(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """Nine "No" that SREGym's judge gave (with its own evidence) stay a graded fail."""
    results = tmp_path / "results"
    write_run(results, "stratus", {P1: [diagnosed("the database is slow", set())]}, all_file=False)
    report = await _import(store, results)
    assert report.problems == []
    [grading] = _gradings(engine)
    assert (grading.status, grading.passed) == ("graded", False)


async def test_a_diagnosis_reading_none_is_a_judged_diagnosis_not_an_empty_one(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A diagnosis whose text is ``None`` (SREGym's ``/submit`` takes any text, and its
    writer writes a missing value as an empty cell, never as ``None``) was judged like
    any other: it is a diagnosed attempt with SREGym's failing grading, counted in the
    agent's pass rate. Only a blank cell means the agent submitted nothing."""
    results = tmp_path / "results"
    write_run(
        results,
        "stratus",
        {
            P1: [diagnosed("None", set()), diagnosed(" ", set())],
            P2: [diagnosed("null", set()), diagnosed("nan", set())],
        },
    )
    report = await _import(store, results)
    assert report.problems == [] and report.conflicts == []
    by_attempt = {(s.scenario_id, s.attempt): s for s in _submissions(engine)}
    gradings = {g.submission_id: g for g in _gradings(engine)}
    for key in ((P1, 1), (P2, 1), (P2, 2)):
        submission = by_attempt[key]
        assert (submission.metadata_ or {})["import_outcome"] == "diagnosed", key
        grading = gradings[submission.id]
        assert (grading.judge_spec, grading.status, grading.passed) == (
            "external:sregym",
            "graded",
            False,
        )
    assert by_attempt[P1, 1].diagnosis == "None"
    assert (by_attempt[P1, 2].metadata_ or {})["import_outcome"] == "no_submission"
    assert by_attempt[P1, 2].id not in gradings


async def test_a_resumed_run_keeps_the_attempt_it_ran_and_reports_the_stale_copy(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A run resumed from a crashed run's CSV (SREGym's ``--resume``) seeds its rows with
    that CSV's and reruns a problem cut short from attempt 1: its problem's file and
    ``<agent>_ALL_results.csv`` hold the stale attempt 1 and the run's own, which alone
    is in ``run_1/``. The run's attempt 1 is the one it made, with its verdict; the stale
    copies are the conflicts reported."""
    results = tmp_path / "results"
    write_run(
        results,
        "react",
        {
            P1: [
                diagnosed("user-service targets port 9999 instead of 9090", set(IDS)),
                diagnosed("user-service port mismatch", set(IDS)),
            ]
        },
        resumed={P1: [diagnosed("the geo pod restarts", set())]},
    )
    report = await _import(store, results)
    by_attempt = {s.attempt: s for s in _submissions(engine)}
    assert by_attempt[1].diagnosis == "user-service targets port 9999 instead of 9090"
    assert [g.passed for g in _gradings(engine) if g.submission_id == by_attempt[1].id] == [True]
    assert sorted(c.where for c in report.conflicts) == [
        f"{RUN}/react/{P1}/{P1}_react_results.csv:2",
        f"{RUN}/react_ALL_results.csv:2",
    ]
    assert report.problems == []


async def test_an_agents_own_csv_log_in_a_run_folder_is_skipped(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """SREGym's default agent, stratus, writes its token log ``<pid>_stratus_output.csv``
    (no ``problem_id`` column) into each attempt's ``run_<n>/`` folder: it is no results
    file, skipped by the import and by the count of an import job's total, not refused
    row by row."""
    results = tmp_path / "results"
    write_run(results, "stratus", {P1: [diagnosed("user-service targets port 9999", set(IDS))]})
    output = results / RUN / "stratus" / P1 / "run_1" / f"{P1}_stratus_output.csv"
    output.write_text(
        "agent_name,input_tokens,output_tokens,total_tokens,time,steps,num_retry_attempts,"
        "rollback_stack,oracle_results\n"
        "diagnosis_agent,48211,2210,50421,93.41,17,0,N/A,N/A\n"
        "mitigation_agent,91544,5120,96664,180.2,31,1,\"['kubectl patch svc user-service']\","
        "\"[{'success': True}]\"\n",
        encoding="utf-8",
    )
    report = await _import(store, results)
    assert report.problems == [], [str(p) for p in report.problems]
    assert (report.submissions, report.rows) == (1, 3)
    assert sregym_outline(results).items == 3 == len(list(read_sregym_folder(results)))
    assert f"{P1}_stratus_output.csv" not in " ".join(_kept_paths(engine))


def _two_problems(results: Path) -> Path:
    """One agent's run of P1 and P2 under ``results``: SREGym's three files of each."""
    return write_run(
        results,
        "stratus",
        {
            P1: [diagnosed("user-service targets port 9999 instead of 9090", set(IDS))],
            P2: [diagnosed("geo crashes: wrong image tag", set(IDS[:4]))],
        },
    )


def test_a_files_path_starts_at_its_run_folder_whatever_it_was_packed_under(
    tmp_path: Path,
) -> None:
    """Each of SREGym's files (the attempt's, its problem's, the agent's ``_ALL_``) keeps
    its path from the run folder on, the run folder's name first: read from the results
    folder (whose top folder is the run folder) or from a folder above it, the paths are
    the same."""
    _two_problems(tmp_path / "packed" / "results")
    paths = {
        frozenset(
            (a.path, a.line) for a in read_sregym_folder(root) if isinstance(a, SregymAttempt)
        )
        for root in (tmp_path / "packed" / "results", tmp_path / "packed")
    }
    [read] = paths
    assert len(read) == 7
    assert {path.split("/")[0] for path, _ in read} == {RUN}
    assert {path.rsplit("/", 1)[-1] for path, _ in read} == {
        "stratus_ALL_results.csv",
        f"{P1}_stratus_results.csv",
        f"{P1}_results.csv",
        f"{P2}_stratus_results.csv",
        f"{P2}_results.csv",
    }


def test_a_run_folder_is_refused_as_a_drive_and_taken_named_by_its_time(
    tmp_path: Path,
) -> None:
    """A file's path from the run folder on meets the rule of an archive's entries, as
    the export writes it back there: a run folder named by its time
    (``2025-06-01T12:00:00``) is taken, one named as a drive (``C:``) refuses its rows,
    naming the file."""
    write_run(tmp_path / "timed", "stratus", {P1: [diagnosed("port 9999", set(IDS))]},
              run="2025-06-01T12:00:00")  # fmt: skip
    write_run(tmp_path / "drive", "stratus", {P1: [diagnosed("port 9999", set(IDS))]}, run="C:")
    timed = list(read_sregym_folder(tmp_path / "timed"))
    assert timed and all(isinstance(a, SregymAttempt) for a in timed), timed
    refused = list(read_sregym_folder(tmp_path / "drive"))
    assert len(refused) == 3 and not any(isinstance(r, SregymAttempt) for r in refused)
    assert all("a path on a drive" in r.message for r in refused), refused  # type: ignore[union-attr]


async def test_rows_kept_under_a_top_folder_before_stand_for_the_same_files(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A row kept at a path that begins above its run folder (``results/<run>/...``, the
    archive's own path, as earlier versions kept it) keeps that path, and importing the
    same results again, packed either way, adds no second copy of its file."""
    _two_problems(tmp_path / "packed" / "results")
    await _import(store, tmp_path / "packed")
    with session_factory(engine)() as session, session.begin():
        o = SregymOriginalRowRecord
        session.execute(update(o).values(path=literal("results/") + col(o.path)))
    kept = _kept_paths(engine)
    for root in (tmp_path / "packed", tmp_path / "packed" / "results"):
        again = await _import(store, root)
        assert (again.submissions, again.already_imported) == (0, 7)
        assert _kept_paths(engine) == kept
    assert all(path.startswith(f"results/{RUN}/") for path in kept)


def _files(root: Path) -> dict[str, bytes]:
    """Every CSV file under ``root`` by its path there, as bytes."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}


async def _export(store: Store, out: Path, filters: ReportFilter | None = None) -> dict[str, bytes]:
    """The SREGym export of ``filters`` (all) written to ``out``, its files."""
    await write_sregym_folder(store, filters or ReportFilter(), out, current=load_rubric_dir())
    return _files(out)


async def test_the_export_of_a_resumed_run_imported_again_stores_no_row_twice(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A resumed run's problem file and ``<agent>_ALL_results.csv`` hold a stale attempt 1
    (a conflict, left out of the export) before the run's own rows, which the export so
    writes a line higher. Imported again, every attempt is already imported, no row is
    kept twice, and the next export is the same as the first."""
    write_run(
        tmp_path / "results",
        "react",
        {P1: [diagnosed("user-service targets port 9999", set(IDS)),
              diagnosed("user-service port mismatch", set(IDS))]},
        resumed={P1: [diagnosed("the geo pod restarts", set())]},
    )  # fmt: skip
    first = await _import(store, tmp_path / "results")
    assert first.submissions == 2 and len(first.conflicts) == 2
    kept = _kept_paths(engine)
    exported = await _export(store, tmp_path / "exported")
    again = await _import(store, tmp_path / "exported")
    assert (again.submissions, again.conflicts, again.problems) == (0, [], [])
    assert _kept_paths(engine) == kept
    assert await _export(store, tmp_path / "exported-again") == exported


async def test_a_filtered_export_imported_again_stores_no_row_twice(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """``<P2>_<agent>_results.csv`` holds P1's row before P2's; an export filtered to P2
    writes that file with P2's row alone, a line higher. Imported again, nothing is
    stored, and the whole export still gives every file as SREGym wrote it."""
    results = tmp_path / "results"
    _two_problems(results)
    first = await _import(store, results)
    assert (first.submissions, first.conflicts, first.problems) == (2, [], [])
    kept = _kept_paths(engine)
    await _export(store, tmp_path / "p2-only", ReportFilter(scenario_id=P2))
    again = await _import(store, tmp_path / "p2-only")
    assert (again.submissions, again.conflicts, again.problems) == (0, [], [])
    assert _kept_paths(engine) == kept
    whole = await _export(store, tmp_path / "whole")
    assert whole == _files(results)
    shared = whole[f"{RUN}/stratus/{P2}/{P2}_stratus_results.csv"].decode()
    assert [r["problem_id"] for r in csv.DictReader(io.StringIO(shared))] == [P1, P2]


async def test_a_filtered_export_then_the_whole_results_export_every_file_in_its_order(
    store: Store,
    clock: Clock,
    sqlite_template: Path,
    service_key: ServiceKey,
    tmp_path: Path,
) -> None:
    """Another database exports a run filtered to P3, whose problem file then holds P3's
    row alone, two lines higher than SREGym wrote it. Imported here, then the whole
    results: every attempt is stored once, and the next export gives every file as
    SREGym wrote it, its rows in their order (an attempt's kept row keeps the higher of
    the lines it was met at)."""
    results = tmp_path / "results"
    write_run(
        results,
        "stratus",
        {
            P1: [diagnosed("user-service targets port 9999 instead of 9090", set(IDS))],
            P2: [diagnosed("geo crashes: wrong image tag", set(IDS[:4]))],
            P3: [diagnosed("mongodb-geo rejects the admin user", set(IDS[:7]))],
        },
    )
    other_db = tmp_path / "other.db"
    shutil.copyfile(sqlite_template, other_db)
    other_engine = make_engine(f"sqlite:///{other_db}")
    try:
        other = Store(other_engine, clock=clock, key=service_key)
        assert (await _import(other, results)).submissions == 3
        await _export(other, tmp_path / "p3-only", ReportFilter(scenario_id=P3))
    finally:
        other_engine.dispose()

    first = await _import(store, tmp_path / "p3-only")
    assert (first.submissions, first.conflicts, first.problems) == (1, [], [])
    again = await _import(store, results)
    assert (again.submissions, again.conflicts, again.problems) == (2, [], [])
    exported = await _export(store, tmp_path / "whole")
    shared = exported[f"{RUN}/stratus/{P3}/{P3}_stratus_results.csv"].decode()
    assert [r["problem_id"] for r in csv.DictReader(io.StringIO(shared))] == [P1, P2, P3]
    assert exported == _files(results)


async def test_the_export_after_a_verdict_override_imported_again_is_already_imported(
    store: Store, tmp_path: Path
) -> None:
    """After an adjudicator's verdict override, the export writes that attempt's verdict
    columns from the overridden grading. Imported again into the same database, every
    row of it is already imported, none a conflict: the export can go back in."""
    results = tmp_path / "results"
    attempts = [diagnosed("user-service port", set(IDS[:5])), diagnosed("port 9999", set(IDS))]
    write_run(results, "stratus", {P1: attempts})
    assert (await _import(store, results)).submissions == 2
    views, _ = await store.gradings.page(limit=10)
    failed = next(v for v in views if v.grading.passed is False)
    await override(store, failed.grading.id, rubric=sregym_rubric(),
                   expected_revision=failed.grading.revision, kind="verdict", verdict="pass",
                   author_id="h1", author_name="Hana", reason="read the diagnosis")  # fmt: skip
    await _export(store, tmp_path / "exported")
    again = await _import(store, tmp_path / "exported")
    assert again.conflicts == [], [(c.where, c.field) for c in again.conflicts]
    assert (again.submissions, again.problems) == (0, [])
    assert again.already_imported == again.rows


@pytest.mark.parametrize("unscored", ["parse failure", "checklist incomplete"])
async def test_a_human_decided_unscored_attempt_exported_elsewhere_keeps_its_verdict(
    store: Store,
    clock: Clock,
    sqlite_template: Path,
    service_key: ServiceKey,
    tmp_path: Path,
    unscored: str,
) -> None:
    """An unscored SREGym attempt (its judge's reply not parsed, or a checklist that
    leaves questions out beside no success) that an adjudicator's verdict override
    decides exports ``Diagnosis.success`` True beside a checklist ``[]``: a verdict
    alone. Imported into another database, it is unscored ``sregym_verdict_only`` (no
    answers to grade by), with the verdict kept in ``metadata.sregym`` and a ``detail``
    that names no grading."""
    results = tmp_path / "results"
    if unscored == "parse failure":
        result = {"Diagnosis": {**parse_failure_result(), "submission": "geo restarts"}}
    else:
        checklist = [{"id": q, "answer": "Yes"} for q in IDS[:4]]
        diagnosis = {"submission": "geo restarts", "checklist": checklist, "success": None}
        result = {"Diagnosis": diagnosis}
    write_run(results, "stratus", {P1: [result]}, all_file=False)
    assert (await _import(store, results)).submissions == 1
    [view], _ = await store.gradings.page(limit=10)
    assert view.grading.status == "unscored", view.grading
    await override(store, view.grading.id, rubric=sregym_rubric(),
                   expected_revision=view.grading.revision, kind="verdict", verdict="pass",
                   author_id="h1", author_name="Hana", reason="read the diagnosis")  # fmt: skip
    exported = await _export(store, tmp_path / "exported")
    rows = [r for data in exported.values() for r in csv.DictReader(io.StringIO(data.decode()))]
    assert {(r["Diagnosis.success"], r["Diagnosis.checklist"]) for r in rows} == {("True", "[]")}

    other_db = tmp_path / "other.db"
    shutil.copyfile(sqlite_template, other_db)
    other_engine = make_engine(f"sqlite:///{other_db}")
    try:
        other = Store(other_engine, clock=clock, key=service_key)
        report = await _import(other, tmp_path / "exported")
        [again], _ = await other.gradings.page(limit=10)
        [submission] = _submissions(other_engine)
    finally:
        other_engine.dispose()
    assert (report.submissions, report.problems) == (1, [])
    grading = again.grading
    assert (grading.status, grading.unscored_reason) == ("unscored", "sregym_verdict_only")
    assert grading.passed is None
    assert "Diagnosis.success True" in (grading.detail or ""), grading.detail
    assert "sre-judge grading" not in (grading.detail or ""), grading.detail
    assert submission.metadata_["sregym"]["success"] == "True"


async def test_a_changed_verdict_of_an_attempt_graded_as_imported_is_a_conflict(
    store: Store, tmp_path: Path
) -> None:
    """An attempt whose shown grading is SREGym's own as imported: the same row with
    another ``Diagnosis.judgment`` imported again is a conflict naming that column."""
    results = tmp_path / "results"
    write_run(results, "stratus", {P1: [diagnosed("port 9999", set(IDS))]}, all_file=False)
    assert (await _import(store, results)).submissions == 1
    for path in results.rglob("*.csv"):
        text = path.read_text(encoding="utf-8")
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
        for row in rows:
            row["Diagnosis.judgment"] = "something else"
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
        path.write_text(buffer.getvalue(), encoding="utf-8", newline="")
    again = await _import(store, results)
    assert again.submissions == 0
    assert {c.field for c in again.conflicts} == {"Diagnosis.judgment"}


def _rows_without_attempt_numbers(results: Path, *diagnoses: list[str]) -> None:
    """A file of P2's rows that name no attempt (no ``attempt`` column): a diagnosis with
    the cells after it for each of ``diagnoses`` (each checked ``Yes`` throughout); by
    default two, the first spanning two lines."""
    folder = results / RUN / "stratus" / P2
    folder.mkdir(parents=True)
    checklist = repr([{"id": q, "answer": "Yes"} for q in IDS])
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # CRLF line ends, as SREGym's writer writes them
    writer.writerow(["problem_id", "Diagnosis.submission", "Diagnosis.success",
                     "Diagnosis.checklist"])  # fmt: skip
    for diagnosis, *more in diagnoses or (
        ["geo crashes:\r\nwrong image tag"],
        ["geo runs a wrong image tag"],
    ):
        writer.writerow([P2, diagnosis, "True", checklist, *more])
    (folder / "results.csv").write_text(buffer.getvalue(), newline="")


@pytest.mark.parametrize("first", ["contents", "top folder"])
async def test_rows_without_an_attempt_number_are_one_import_however_packed(
    store: Store, engine: Engine, tmp_path: Path, first: str
) -> None:
    """Rows that name no attempt are keyed by their file from the run folder on and their
    line: the same results imported as the results folder's contents and again under one
    top folder, in either order, are already imported the second time."""
    _rows_without_attempt_numbers(tmp_path / "packed" / "results")
    roots = {"contents": tmp_path / "packed" / "results", "top folder": tmp_path / "packed"}
    second = "contents" if first == "top folder" else "top folder"
    report = await _import(store, roots[first])
    assert report.problems == [] and report.submissions == 2
    again = await _import(store, roots[second])
    assert (again.submissions, again.already_imported) == (0, 2)
    assert len(_submissions(engine)) == 2


async def test_rows_without_an_attempt_number_keyed_from_the_import_s_root_are_known(
    store: Store, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row that names no attempt stored under its file from the import's root (with the
    folders the results were packed under, as earlier versions keyed it) and its last
    line is already imported when the same results are imported again so packed."""
    _rows_without_attempt_numbers(tmp_path / "packed" / "results")
    with monkeypatch.context() as patch:  # the key earlier versions stored
        patch.setattr(rows, "_where", lambda a: f"{a.source.rpartition(':')[0]}:{a.line}")
        await _import(store, tmp_path / "packed")
    assert {s.idempotency_key for s in _submissions(engine)} == {
        f"sregym:results/{RUN}/stratus/{P2}/results.csv:3",
        f"sregym:results/{RUN}/stratus/{P2}/results.csv:4",
    }
    kept = _kept_paths(engine)
    again = await _import(store, tmp_path / "packed")
    assert (again.submissions, again.already_imported, again.conflicts) == (0, 2, [])
    assert len(_submissions(engine)) == 2 and _kept_paths(engine) == kept


async def test_an_export_that_left_out_a_refused_row_without_an_attempt_number_adds_nothing(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A file of rows that name no attempt whose second row is refused (a cell too many):
    the export leaves it out, so the third row sits a line higher. Imported again, that
    row is the attempt whose kept row in the same file has the same cells: nothing is
    stored twice."""
    _rows_without_attempt_numbers(
        tmp_path / "results",
        ["geo crashes: wrong image tag"],
        ["refused", "one cell too many"],
        ["geo runs a wrong image tag"],
    )
    first = await _import(store, tmp_path / "results")
    assert first.submissions == 2 and len(first.problems) == 1, first.problems
    kept = _kept_paths(engine)
    assert len(await _export(store, tmp_path / "exported")) == 1
    again = await _import(store, tmp_path / "exported")
    assert (again.conflicts, again.problems) == ([], [])
    assert (again.submissions, again.already_imported) == (0, 2)
    assert len(_submissions(engine)) == 2 and _kept_paths(engine) == kept


#: a diagnosis of each problem, for files of rows that name no attempt
DIAGNOSES = {P1: "user-service targets port 9999 instead of 9090", P2: "geo runs a wrong image tag"}


def _rows_of_problems(results: Path, *problems: str) -> Path:
    """A file of rows that name no attempt (no ``attempt`` column), one of each of
    ``problems`` in that order (its diagnosis in :data:`DIAGNOSES`, checked ``Yes``
    throughout); ``results``."""
    folder = results / RUN / "stratus" / P2
    folder.mkdir(parents=True)
    checklist = repr([{"id": q, "answer": "Yes"} for q in IDS])
    buffer = io.StringIO()
    writer = csv.writer(buffer)  # CRLF line ends, as SREGym's writer writes them
    writer.writerow(["problem_id", "Diagnosis.submission", "Diagnosis.success",
                     "Diagnosis.checklist"])  # fmt: skip
    for problem in problems:
        writer.writerow([problem, DIAGNOSES[problem], "True", checklist])
    (folder / "results.csv").write_text(buffer.getvalue(), newline="")
    return results


async def test_a_row_moved_up_onto_another_imported_rows_line_is_already_imported(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A file of rows that name no attempt, P1's row then P2's: an export filtered to P2
    writes P2's row on the line P1's row was imported at. Imported again, that row is the
    attempt whose kept row in the same file has the same cells, not a conflict with the
    attempt first imported at its line."""
    _rows_of_problems(tmp_path / "results", P1, P2)
    first = await _import(store, tmp_path / "results")
    assert (first.submissions, first.conflicts, first.problems) == (2, [], [])
    exported = await _export(store, tmp_path / "p2-only", ReportFilter(scenario_id=P2))
    [shared] = exported.values()
    assert [r["problem_id"] for r in csv.DictReader(io.StringIO(shared.decode()))] == [P2]
    again = await _import(store, tmp_path / "p2-only")
    assert (again.conflicts, again.problems) == ([], []), again.conflicts
    assert (again.submissions, again.already_imported) == (0, 1)
    assert len(_submissions(engine)) == 2


async def test_a_filtered_file_then_the_whole_file_of_rows_without_attempt_numbers_stores_each_once(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """Rows that name no attempt: a file filtered to P2 (P2's row alone, on the line
    P1's row has in the whole file), imported before the whole file (P1's row, then
    P2's a line lower). P1's row is a new attempt, not a conflict with P2's attempt
    imported at its line, and P2's row is the attempt imported from the filtered file:
    each attempt is stored once, and the export gives the whole file back in its order."""
    filtered = _rows_of_problems(tmp_path / "p2-only", P2)
    whole = _rows_of_problems(tmp_path / "whole", P1, P2)
    first = await _import(store, filtered)
    assert (first.submissions, first.conflicts, first.problems) == (1, [], [])
    again = await _import(store, whole)
    assert (again.conflicts, again.problems) == ([], []), again.conflicts
    assert (again.submissions, again.already_imported) == (1, 1)
    stored = sorted((s.scenario_id or "", s.diagnosis) for s in _submissions(engine))
    assert stored == sorted(DIAGNOSES.items())
    assert await _export(store, tmp_path / "exported") == _files(whole)


#: two diagnoses of one problem, for files of its attempts that name no attempt number
FIRST, SECOND = "geo runs a wrong image tag", "the geo deployment's image tag does not exist"


async def test_a_file_filtered_to_one_attempt_of_a_problem_then_the_whole_file_stores_each_once(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """Two attempts of one problem that name no attempt number (FIRST's row, then
    SECOND's): a file that leaves FIRST's row out (an export filtered by judge or date)
    holds SECOND's on the line FIRST's row has in the whole file. Imported first, then
    the whole file: FIRST's row is a new attempt, not a conflict with the attempt
    imported at its line, and SECOND's row is that attempt; importing either file again
    stores nothing, and the export gives the whole file back in its order."""
    filtered, whole = tmp_path / "filtered", tmp_path / "whole"
    _rows_without_attempt_numbers(filtered, [SECOND])
    _rows_without_attempt_numbers(whole, [FIRST], [SECOND])
    first = await _import(store, filtered)
    assert (first.submissions, first.conflicts, first.problems) == (1, [], [])
    again = await _import(store, whole)
    assert (again.conflicts, again.problems) == ([], []), again.conflicts
    assert (again.submissions, again.already_imported) == (1, 1)
    assert sorted(s.diagnosis for s in _submissions(engine)) == sorted([FIRST, SECOND])
    for root, rows_in_it in ((whole, 2), (filtered, 1)):
        repeated = await _import(store, root)
        assert (repeated.conflicts, repeated.submissions) == ([], 0), repeated.conflicts
        assert repeated.already_imported == rows_in_it
    assert len(_submissions(engine)) == 2
    assert await _export(store, tmp_path / "exported") == _files(whole)


async def test_an_export_filtered_to_sregyms_verdicts_after_a_promote_then_the_whole_file(
    store: Store, clock: Clock, sqlite_template: Path, service_key: ServiceKey, tmp_path: Path
) -> None:
    """Two attempts of one problem that name no attempt number, FIRST's regraded with
    its new verdict promoted: the export filtered to SREGym's verdicts leaves FIRST's row
    out and writes SECOND's a line higher. That export imported into another database,
    then the original results: each attempt is stored there once."""
    whole = tmp_path / "whole"
    _rows_without_attempt_numbers(whole, [FIRST], [SECOND])
    assert (await _import(store, whole)).submissions == 2
    spec = "openai:new@http://127.0.0.1:9/v1"
    target = RegradeTarget(sregym_rubric(), spec, "openai", "new", "promote")
    await RegradeJobQueries(store.db).create_job(RegradeFilter(), target, actor="admin")
    claims = await store.queue.claim_pending("w", limit=5, lease_seconds=60)
    [regraded] = [c for c in claims if c.diagnosis == FIRST]
    assert await store.queue.complete(regraded.grading_id, "w", graded_result(IDS))
    exported = await _export(store, tmp_path / "filtered", ReportFilter(judge="external:sregym"))
    [data] = exported.values()
    assert [r["Diagnosis.submission"] for r in csv.DictReader(io.StringIO(data.decode()))] == [
        SECOND
    ]
    other_db = tmp_path / "other.db"
    shutil.copyfile(sqlite_template, other_db)
    other_engine = make_engine(f"sqlite:///{other_db}")
    try:
        other = Store(other_engine, clock=clock, key=service_key)
        assert (await _import(other, tmp_path / "filtered")).submissions == 1
        again = await _import(other, whole)
        stored = sorted(s.diagnosis for s in _submissions(other_engine))
    finally:
        other_engine.dispose()
    assert (again.conflicts, again.submissions) == ([], 1), again.conflicts
    assert stored == sorted([FIRST, SECOND])


async def test_two_rows_of_the_same_cells_without_attempt_numbers_are_two_attempts(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A file whose two rows name no attempt and repeat each other's cells (two attempts
    that diagnosed alike): two submissions, and the same file imported again stores
    nothing."""
    results = _rows_of_problems(tmp_path / "results", P2, P2)
    first = await _import(store, results)
    assert (first.submissions, first.conflicts, first.problems) == (2, [], [])
    again = await _import(store, results)
    assert (again.submissions, again.already_imported, again.conflicts) == (0, 2, [])
    assert len(_submissions(engine)) == 2


def _one_attempt(results: Path, verdict: bool, *, numbered: bool) -> Path:
    """P2's one attempt (diagnosis FIRST) in ``<run>/stratus/<P2>/results.csv`` with
    SREGym's ``verdict`` (all checked ``Yes``, or only the first four), with or without
    an ``attempt`` column; ``results``."""
    folder = results / RUN / "stratus" / P2
    folder.mkdir(parents=True)
    checklist = repr([{"id": q, "answer": "Yes" if verdict or n < 4 else "No"}
                      for n, q in enumerate(IDS)])  # fmt: skip
    header = ["problem_id", "Diagnosis.submission", "Diagnosis.success",
              "Diagnosis.judgment", "Diagnosis.checklist"]  # fmt: skip
    row = [P2, FIRST, str(verdict), str(verdict), checklist]
    if numbered:
        header.insert(1, "attempt")
        row.insert(1, "1")
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerows([header, row])
    (folder / "results.csv").write_text(buffer.getvalue(), newline="")
    return results


@pytest.mark.parametrize("numbered", [True, False], ids=["attempt-column", "no-attempt-column"])
async def test_the_same_diagnosis_with_another_sregym_verdict_is_a_conflict(
    store: Store, engine: Engine, tmp_path: Path, numbered: bool
) -> None:
    """The same file imported again after SREGym's judge ran again: the same line,
    problem and diagnosis with another verdict is the attempt imported before, in
    conflict, with or without an ``attempt`` column; the attempt is stored once, with
    the verdict first imported (only a cell besides the verdict's, such as another
    diagnosis or ``TTL``, makes a row without an attempt number on an imported
    attempt's line a new attempt)."""
    first = await _import(store, _one_attempt(tmp_path / "first", True, numbered=numbered))
    assert (first.submissions, first.conflicts, first.problems) == (1, [], [])
    again = await _import(store, _one_attempt(tmp_path / "again", False, numbered=numbered))
    assert (again.submissions, len(again.conflicts)) == (0, 1), again
    assert again.conflicts[0].field in {"Diagnosis.success", "Diagnosis.judgment"}
    assert len(_submissions(engine)) == 1


def _attempts_diagnosed_alike(results: Path, *ttls: str) -> Path:
    """A file of P2's rows that name no attempt, each diagnosed FIRST with SREGym's pass
    (checked ``Yes`` throughout) and one of ``ttls`` in its ``TTL``; ``results``."""
    folder = results / RUN / "stratus" / P2
    folder.mkdir(parents=True)
    checklist = repr([{"id": q, "answer": "Yes"} for q in IDS])
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["Diagnosis.checklist", "Diagnosis.submission", "Diagnosis.success",
                     "TTL", "problem_id"])  # fmt: skip
    for ttl in ttls:
        writer.writerow([checklist, FIRST, "True", ttl, P2])
    (folder / "results.csv").write_text(buffer.getvalue(), newline="")
    return results


async def test_a_filtered_file_then_the_whole_file_of_attempts_diagnosed_alike_stores_each_once(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """Two attempts of one problem that name no attempt number, with the same diagnosis
    and SREGym's verdict but another ``TTL``: a file filtered to the second holds its row
    on the line the first has in the whole file. Imported first, then the whole file:
    the first row is a new attempt, not a conflict with the attempt imported at its line,
    and the second is that attempt; each is stored once, and the export gives the whole
    file back in its order."""
    filtered = _attempts_diagnosed_alike(tmp_path / "filtered", "97.2")
    whole = _attempts_diagnosed_alike(tmp_path / "whole", "41.4", "97.2")
    first = await _import(store, filtered)
    assert (first.submissions, first.conflicts, first.problems) == (1, [], [])
    again = await _import(store, whole)
    assert (again.conflicts, again.problems) == ([], []), again.conflicts
    assert (again.submissions, again.already_imported) == (1, 1)
    assert len(_submissions(engine)) == 2
    assert await _export(store, tmp_path / "exported") == _files(whole)


def test_an_attempts_own_file_of_a_problem_whose_id_ends_in_ALL_is_of_its_run_and_agent(
    tmp_path: Path,
) -> None:
    """``<run>/<agent>/scale_ALL/run_1/scale_ALL_results.csv`` is the attempt's own file
    of problem ``scale_ALL``, not an agent's ``<agent>_ALL_results.csv``: its run and
    agent are the run folder and ``stratus``, as in the problem's and the agent's files."""
    root = tmp_path / "results"
    write_run(root, "stratus", {"scale_ALL": [diagnosed("the pods were scaled to 0", set(IDS))]})
    read = [r for r in read_sregym_folder(root) if isinstance(r, SregymAttempt)]
    assert len(read) == 3
    assert {(r.run, r.agent) for r in read} == {(RUN, "stratus")}, [
        (r.path, r.run, r.agent) for r in read
    ]


async def test_an_attempt_of_a_problem_whose_id_ends_in_ALL_is_one_submission(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """An attempt of problem ``scale_ALL``, written in SREGym's three files, is one
    submission of its agent and run; its other two copies are already imported."""
    root = tmp_path / "results"
    write_run(root, "stratus", {"scale_ALL": [diagnosed("the pods were scaled to 0", set(IDS))]})
    report = await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(root), {"scale_ALL": "scaled to 0"}, rubric=sregym_rubric()
    )
    assert [(s.run_id, s.agent) for s in _submissions(engine)] == [(RUN, "stratus")]
    assert (report.submissions, report.already_imported) == (1, 2)


def test_a_folder_whose_name_ends_in_csv_is_no_csv_file(tmp_path: Path) -> None:
    """Only files are CSV files: a folder named ``backup.csv`` is no file that cannot be
    read, and the results file inside it is read."""
    folder = tmp_path / "results" / RUN / "stratus" / "p1" / "backup.csv"
    folder.mkdir(parents=True)
    (folder / "p1_results.csv").write_text("problem_id,attempt\r\np1,1\r\n")
    read = list(read_sregym_folder(tmp_path / "results"))
    assert [r for r in read if not isinstance(r, SregymAttempt)] == []
    assert len(read) == 1
