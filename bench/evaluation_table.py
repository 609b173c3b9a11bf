"""The evaluation table of two judges over many attempts: how long reading and rendering take.

    python bench/evaluation_table.py [--db sqlite|postgres] [--attempts 1000] [--runs 5]

Seeds ``--attempts`` graded submissions, each graded by two judges (the service's and a
shadow regrade's; the second disagrees on every tenth), written straight into the tables
(the figures are of the reading, not of grading). Then it builds the table the way
``/reports/table?by=judge`` does (one snapshot read, rows built) and renders the page's
template, ``--runs`` times: median and slowest of each part and of both (target: under
one second for 1,000 attempts).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/evaluation_table.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, print_report


def _seed(session: Any, attempts: int) -> None:
    """``attempts`` submissions, each with a current grading and a shadow one."""
    from sqlalchemy import insert

    from storage.canonical import utcnow
    from storage.regrade.tables import RegradeJobRecord
    from storage.tables import GradingRecord, SubmissionRecord, new_id, row_values

    now = utcnow()
    job = RegradeJobRecord(
        id="bench-job", state="done", rubric_id="sregym-rca", rubric_version="v1",
        judge_spec="ollama:judge-b", mode="shadow", created_by="bench", created_at=now,
    )  # fmt: skip
    session.add(job)
    session.flush()
    submissions, gradings = [], []
    for n in range(attempts):
        submission = SubmissionRecord(
            id=new_id(), diagnosis=f"diagnosis {n}", ground_truth="truth",
            ground_truth_source="scenario", ground_truth_sha256="0" * 64,
            scenario_id=None, agent=f"agent-{n % 3}", model="m", run_id=f"run-{n % 7}",
            attempt=n % 5, submitted_by="bench", request_hash="0" * 64, created_at=now,
        )  # fmt: skip
        submissions.append(row_values(submission))
        for judge, current in (("judge-a", True), ("judge-b", False)):
            passed = judge == "judge-a" or n % 10 != 0
            grading = GradingRecord(
                id=new_id(), submission_id=submission.id, rubric_id="sregym-rca",
                rubric_version="v1", judge_spec=f"ollama:{judge}", judge_backend="ollama",
                judge_model=judge, status="graded", yes_count=9 if passed else 4,
                passed=passed, judge_passed=passed, is_current=current, created_at=now,
                regrade_job_id=None if current else "bench-job",
            )  # fmt: skip
            values = row_values(grading)
            values["review_reasons"] = []
            gradings.append(values)
    connection = session.connection()
    connection.execute(insert(SubmissionRecord.__table__), submissions)  # type: ignore[attr-defined]
    connection.execute(insert(GradingRecord.__table__), gradings)  # type: ignore[attr-defined]


async def _measure(url: str, attempts: int, runs: int) -> tuple[list[float], list[float], int]:
    from api.reports.evaluation import evaluation_table
    from api.reports.filters import ReportFilter
    from api.web.plugin import _environment
    from storage import Store, make_engine, upgrade

    engine = make_engine(url)
    await upgrade(engine)
    store = Store(engine)
    await store.db.run(_seed, attempts)
    template = _environment().get_template("evaluation.html")
    reads, renders, rows = [], [], 0
    for _ in range(runs):
        started = time.perf_counter()
        table = await evaluation_table(store, ReportFilter(), by="judge")
        read = time.perf_counter()
        html = template.render(
            table=table, values={}, by="judge", kinds=(), disagreeing_only=False,
            scope="all", csv_link="", me=None, csrf="", csrf_field="_csrf",
        )  # fmt: skip
        reads.append(read - started)
        renders.append(time.perf_counter() - read)
        rows = len(table.rows)
        assert html.count('data-disagree="yes"') == table.disagreeing
    engine.dispose()
    return reads, renders, rows


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with bench_database(args.db) as url:
        reads, renders, rows = asyncio.run(_measure(url, args.attempts, args.runs))
    both = [r + p for r, p in zip(reads, renders, strict=True)]
    ms = 1000
    figures = [
        Figure(f"read and build, {args.db}, median", statistics.median(reads) * ms, "ms"),
        Figure("render the page's template, median", statistics.median(renders) * ms, "ms"),
        Figure("both, median", statistics.median(both) * ms, "ms"),
        Figure("both, slowest", max(both) * ms, "ms", target="< 1000 ms", met=max(both) < 1),
        Figure("rows", rows, ""),
    ]
    title = "The evaluation table of two judges"
    print_report("evaluation_table", title, figures, {"attempts": args.attempts, "db": args.db})


if __name__ == "__main__":
    main()
