"""Importing results folders laid out as SREGym's driver writes them.

SREGym writes each attempt three times: alone in
``<agent>/<pid>/run_<n>/<pid>_results.csv``, in ``<agent>/<pid>/<pid>_<agent>_results.csv``
(every row of the agent so far: the rows of the problems run before it too) and in
``<agent>_ALL_results.csv`` at the top of the run folder. Each attempt is one submission
of the agent and run of its file, whichever files it is read from; an attempt judged and
then timed out keeps SREGym's verdict; SREGym's default checklist for a judge reply it
could not parse is an unscored grading, not a failed diagnosis.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine

from api.imports.queries import ImportQueries
from api.imports.report import ImportReport
from api.imports.sregym import read_sregym_folder
from storage import Store, SubmissionRecord
from storage.engine import session_factory
from storage.tables import GradingRecord
from tests.storage.helpers import sregym_rubric
from tests.support.sregym_driver import IDS, RUN, diagnosed, parse_failure_result, write_run

#: the engine matters here (one submission per attempt met in several files)
pytestmark = pytest.mark.postgres

P1 = "k8s_target_port-misconfig-detection-1"
P2 = "misconfig_app_hotel_res-localization-1"
PROBLEMS = {
    P1: "[fault_spec] component=service/user-service; namespace=social-network || "
    "The user-service Service targets port 9999 while its pods listen on 9090.",
    P2: "[fault_spec] component=deployment/geo; namespace=hotel-reservation || "
    "The geo deployment runs a wrong image tag that crashes at start.",
}


def _submissions(engine: Engine) -> list[SubmissionRecord]:
    with session_factory(engine)() as session:
        return list(session.execute(select(SubmissionRecord)).scalars())


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
