"""Throughput against the judge's limit, and the server's memory while it runs.

    python bench/throughput.py [--db sqlite|postgres|all] [--submissions 2000]
                               [--latency 0.2] [--slots 8] [--workers 16]
                               [--processes N (PostgreSQL)]

Starts the simulated judge (``bench/judge_sim.py``: ``slots`` requests at once, each
answered after ``latency`` seconds, so nothing grades faster than slots/latency per
second) and a real ``sre-judge serve`` on a new database (a SQLite file, or a
PostgreSQL database ``srejudge_bench_*`` on 127.0.0.1:5432 that is dropped afterwards),
with ``SRE_JUDGE_JUDGE_CONCURRENCY=slots``. It POSTs the submissions over HTTP and
measures from the first submission to the moment the last grading is done: achieved
gradings per second and their ratio to the limit (target >= 0.95). Meanwhile it samples
the server's resident memory: after 500 gradings, at the end, and its peak (VmHWM). The
memory is flat when the end is within 10 % of the sample after 500; a run of 500
submissions or fewer takes no such sample and gives no verdict on flatness.
With ``--processes N`` the CPU and memory are those of the whole process tree.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/throughput.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, print_report
from bench.judge_sim import SimulatedJudge
from bench.service import (
    ServiceProcess,
    count_done,
    create_token,
    proc_cpu_seconds,
    proc_memory_kib,
    submit_all,
)
from storage import make_engine

TARGET_RATIO = 0.95
#: gradings done when the memory is sampled against which the end's is judged
RSS_CHECKPOINT = 500
#: RSS may not grow by more than this between 500 gradings and the end
RSS_GROWTH_LIMIT = 0.10
_POLL = 0.05


async def _watch(service: ServiceProcess, url: str, total: int, seconds: float) -> dict[str, Any]:
    """Poll the database until every grading is done; sample memory on the way (after
    ``RSS_CHECKPOINT`` gradings only when more are to come: a sample at the end is no
    earlier point to judge the end's memory against)."""
    engine = make_engine(url)
    marks: dict[str, Any] = {"rss_start_mib": proc_memory_kib(service.pid)["VmRSS"] / 1024}
    sample_due = total > RSS_CHECKPOINT
    deadline = time.monotonic() + seconds
    try:
        while True:
            done, unscored = await count_done(engine)
            if sample_due and done >= RSS_CHECKPOINT:
                marks["rss_at_500_mib"] = proc_memory_kib(service.pid)["VmRSS"] / 1024
                sample_due = False
            if done >= total:
                marks["finished"] = time.perf_counter()
                marks["unscored"] = unscored
                return marks
            if time.monotonic() > deadline:
                raise TimeoutError(f"only {done} of {total} gradings done in {seconds:.0f} s")
            await asyncio.sleep(_POLL)
    finally:
        engine.dispose()


async def run_once(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """One full run on one database kind; the raw figures."""
    with (
        bench_database(kind) as url,
        SimulatedJudge(latency=args.latency, slots=args.slots) as judge,
        tempfile.TemporaryDirectory(prefix="srejudge-bench-") as folder,
    ):
        env = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": judge.spec(),
            "SRE_JUDGE_JUDGE_CONCURRENCY": str(args.slots),
            "SRE_JUDGE_WORKERS": str(args.workers),
            "SRE_JUDGE_PROCESSES": str(args.processes),
        }
        token = create_token(env)
        log = Path(args.log_dir or folder) / f"serve-throughput-{kind}.log"
        with ServiceProcess(env, log) as service:
            judge.control(reset=True)
            ideal = args.submissions * args.latency / args.slots
            watcher = asyncio.create_task(
                _watch(service, url, args.submissions, seconds=ideal * 3 + 60)
            )
            cpu_before = proc_cpu_seconds(service.pid)
            started = time.perf_counter()
            await submit_all(
                service.url, token, args.submissions, concurrency=args.clients, rate=args.rate
            )
            submitted = time.perf_counter() - started
            marks = await watcher
            cpu = proc_cpu_seconds(service.pid) - cpu_before
            memory = proc_memory_kib(service.pid)
        stats = judge.stats()
    elapsed = marks["finished"] - started
    return {
        "db": kind,
        "seconds": elapsed,
        "rate": args.submissions / elapsed,
        "limit": args.slots / args.latency,
        "submit_seconds": submitted,
        "cpu_seconds": cpu,
        "judge_requests": stats["served"],
        "judge_max_in_flight": stats["max_in_flight"],
        "unscored": marks["unscored"],
        "rss_start_mib": marks["rss_start_mib"],
        "rss_at_500_mib": marks.get("rss_at_500_mib"),
        "rss_end_mib": memory["VmRSS"] / 1024,
        "rss_peak_mib": memory["VmHWM"] / 1024,
    }


def _figures(run: dict[str, Any], submissions: int) -> list[Figure]:
    db = run["db"]
    ratio = run["rate"] / run["limit"]
    return [
        Figure(f"{db}_gradings_per_s", round(run["rate"], 2), "/s", f"limit {run['limit']:g}/s"),
        Figure(f"{db}_ratio_to_limit", round(ratio, 3), "", f">= {TARGET_RATIO}", ratio >= 0.95),
        Figure(f"{db}_wall_s", round(run["seconds"], 2), "s",
               f"ideal {submissions / run['limit']:g} s"),
        Figure(f"{db}_submit_s", round(run["submit_seconds"], 2), "s", "all POSTs answered"),
        Figure(f"{db}_server_cpu_ms_per_grading", round(1000 * run["cpu_seconds"] / submissions, 2),
               "ms", "POST and grading"),
        Figure(f"{db}_server_cpu_busy", round(run["cpu_seconds"] / run["seconds"], 2), "",
               "share of one core"),
        Figure(f"{db}_judge_requests", run["judge_requests"], "", f"= {submissions}",
               run["judge_requests"] == submissions),
        Figure(f"{db}_judge_max_in_flight", run["judge_max_in_flight"], "", "= slots"),
        Figure(f"{db}_unscored", run["unscored"], "", "0", run["unscored"] == 0),
        Figure(f"{db}_rss_start_mib", round(run["rss_start_mib"], 1), "MiB"),
        *_memory_growth(run, submissions),
        Figure(f"{db}_rss_peak_mib", round(run["rss_peak_mib"], 1), "MiB", "VmHWM"),
    ]  # fmt: skip


def _memory_growth(run: dict[str, Any], submissions: int) -> list[Figure]:
    """The memory after ``RSS_CHECKPOINT`` gradings and at the end, judged flat or not;
    with ``RSS_CHECKPOINT`` submissions or fewer, the end's memory alone, unjudged."""
    db, end = run["db"], round(run["rss_end_mib"], 1)
    if submissions <= RSS_CHECKPOINT:
        return [Figure(f"{db}_rss_after_{submissions}_mib", end, "MiB", "flat: judged above 500")]
    growth = run["rss_end_mib"] / run["rss_at_500_mib"] - 1
    return [
        Figure(f"{db}_rss_after_500_mib", round(run["rss_at_500_mib"], 1), "MiB"),
        Figure(f"{db}_rss_after_{submissions}_mib", end, "MiB",
               f"<= +{RSS_GROWTH_LIMIT:.0%} of after 500", growth <= RSS_GROWTH_LIMIT),
    ]  # fmt: skip


def main() -> None:
    """Parse the options, run on each database, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres", "all"), default="all")
    parser.add_argument("--submissions", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.2, help="judge seconds per call (L)")
    parser.add_argument("--slots", type=int, default=8, help="judge calls at once (C)")
    parser.add_argument("--workers", type=int, default=16, help="SRE_JUDGE_WORKERS")
    parser.add_argument("--clients", type=int, default=32, help="concurrent HTTP submissions")
    parser.add_argument(
        "--rate", type=float, help="submissions per second (default: as fast as answered)"
    )
    parser.add_argument(
        "--processes", type=int, default=1, help="serve processes (above 1: PostgreSQL only)"
    )
    parser.add_argument("--log-dir", help="keep the server logs here (default: discarded)")
    args = parser.parse_args()
    kinds = ["sqlite", "postgres"] if args.db == "all" else [args.db]
    if args.processes > 1 and "sqlite" in kinds:
        parser.error("--processes above 1 needs --db postgres")
    figures: list[Figure] = []
    for kind in kinds:
        figures += _figures(asyncio.run(run_once(kind, args)), args.submissions)
    title = (
        f"Throughput: {args.submissions} submissions, judge L={args.latency:g} s, "
        f"C={args.slots} (limit {args.slots / args.latency:g}/s), {args.processes} process(es) "
        f"x {args.workers} workers, "
        + (f"submitted at {args.rate:g}/s" if args.rate else f"{args.clients} clients, full speed")
    )
    extra = {
        "submissions": args.submissions,
        "rate": args.rate,
        "clients": args.clients,
        "processes": args.processes,
    }
    print_report("throughput", title, figures, extra)


if __name__ == "__main__":
    main()
