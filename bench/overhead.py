"""The service's own cost per grading, with a judge that answers at once.

    python bench/overhead.py [--judge scripted|sim] [--db sqlite|postgres]
                             [--sequential 300] [--submissions 2000] [--profile FILE]

The judge is the in-process scripted judge ``scripted:pass`` (default: isolates the
service) or the simulated judge at L = 0 in its own process (``--judge sim``: adds the
real OpenAI client and a loopback round trip). Two phases against a real ``sre-judge
serve``:

1. latency: submissions one at a time with ``?wait=10``; each round trip (HTTP,
   redaction, storage, claim, prompt, parsing, evidence check, rule, audit, the
   answer) is the time one grading spends in the service. Targets: median <= 5 ms.
2. throughput: ``--submissions`` POSTed by ``--clients`` concurrent clients without
   waiting, timed from the first submission to the last grading done. Target: >= 200
   gradings/s on 2 cores. The server's CPU time per grading is reported too.

``--profile FILE`` records the server with py-spy during phase 2 (``pip install
py-spy``; a speedscope file, or collapsed stacks when FILE ends in ``.txt``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/overhead.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, percentile, print_report
from bench.judge_sim import SimulatedJudge
from bench.service import (
    ServiceProcess,
    count_done,
    create_token,
    proc_cpu_seconds,
    submit_all,
)
from storage import make_engine

TARGET_MEDIAN_MS = 5.0
TARGET_RATE = 200.0


def _profiler(pid: int, output: str) -> subprocess.Popen[bytes]:
    form = "raw" if output.endswith(".txt") else "speedscope"
    # the py-spy of this interpreter's environment, found without an activated venv
    beside = Path(sys.executable).with_name("py-spy")
    spy = str(beside) if beside.exists() else "py-spy"
    command = [spy, "record", "--pid", str(pid), "--gil", "--rate", "250", "--format", form]
    return subprocess.Popen([*command, "--output", output, "--subprocesses"])


async def _wait_done(url: str, total: int, seconds: float = 600) -> float:
    """Poll until ``total`` gradings are done; the moment it saw it (perf_counter)."""
    engine = make_engine(url)
    deadline = time.monotonic() + seconds
    try:
        while (await count_done(engine))[0] < total:
            if time.monotonic() > deadline:
                raise TimeoutError("gradings still pending")
            await asyncio.sleep(0.02)
        return time.perf_counter()
    finally:
        engine.dispose()


async def _measure(service: ServiceProcess, url: str, token: str, args: Any) -> dict[str, Any]:
    await submit_all(service.url, token, args.warmup, concurrency=1, wait=10, first=10**6)
    latencies = await submit_all(
        service.url, token, args.sequential, concurrency=1, wait=10, first=2 * 10**6
    )
    done_before = args.warmup + args.sequential
    profiler = _profiler(service.pid, args.profile) if args.profile else None
    cpu_before = proc_cpu_seconds(service.pid)
    started = time.perf_counter()
    await submit_all(service.url, token, args.submissions, concurrency=args.clients)
    submitted = time.perf_counter() - started
    finished = await _wait_done(url, done_before + args.submissions)
    cpu = proc_cpu_seconds(service.pid) - cpu_before
    if profiler is not None:
        profiler.send_signal(signal.SIGINT)
        profiler.wait(timeout=60)
    elapsed = finished - started
    return {
        "latencies": latencies,
        "rate": args.submissions / elapsed,
        "submit_rate": args.submissions / submitted,
        "cpu_ms": 1000 * cpu / args.submissions,
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both phases on one fresh database."""
    sim = SimulatedJudge(latency=0, slots=64) if args.judge == "sim" else None
    with (
        bench_database(args.db) as url,
        tempfile.TemporaryDirectory(prefix="srejudge-bench-") as folder,
        sim if sim is not None else contextlib.nullcontext(),
    ):
        env = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": sim.spec() if sim is not None else "scripted:pass",
            "SRE_JUDGE_JUDGE_CONCURRENCY": str(args.workers),
            "SRE_JUDGE_WORKERS": str(args.workers),
        }
        token = create_token(env)
        log = Path(args.log_dir or folder) / f"serve-overhead-{args.db}.log"
        with ServiceProcess(env, log) as service:
            return await _measure(service, url, token, args)


def main() -> None:
    """Parse the options, measure, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge", choices=("scripted", "sim"), default="scripted")
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--sequential", type=int, default=300, help="phase 1 gradings")
    parser.add_argument("--submissions", type=int, default=2000, help="phase 2 gradings")
    parser.add_argument("--clients", type=int, default=16, help="phase 2 concurrent clients")
    parser.add_argument("--workers", type=int, default=16, help="SRE_JUDGE_WORKERS")
    parser.add_argument("--profile", help="py-spy output file for phase 2")
    parser.add_argument("--log-dir", help="keep the server log here (default: discarded)")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    latencies_ms = [1000 * s for s in result["latencies"]]
    median, p99 = statistics.median(latencies_ms), percentile(latencies_ms, 0.99)
    rate = result["rate"]
    figures = [
        Figure("median_ms_per_grading", round(median, 2), "ms", f"<= {TARGET_MEDIAN_MS:g} ms",
               median <= TARGET_MEDIAN_MS),
        Figure("p99_ms_per_grading", round(p99, 2), "ms"),
        Figure("gradings_per_s", round(rate, 1), "/s", f">= {TARGET_RATE:g}/s",
               rate >= TARGET_RATE),
        Figure("submissions_per_s", round(result["submit_rate"], 1), "/s", "POSTs answered"),
        Figure("server_cpu_ms_per_grading", round(result["cpu_ms"], 2), "ms"),
    ]  # fmt: skip
    title = (
        f"Overhead: judge {args.judge} (instant), {args.db}, {args.sequential} sequential "
        f"gradings, then {args.submissions} with {args.clients} clients"
    )
    print_report("overhead", title, figures, {"judge": args.judge, "db": args.db})


if __name__ == "__main__":
    main()
