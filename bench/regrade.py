"""What a batch regrade costs: judge calls saved by the judge cache, wall time, and the
service's CPU per item (less sensitive than wall time to other work on the machine).

    python bench/regrade.py [--gradings 10000] [--db sqlite|postgres]
                            [--asking single|per_question|both]
                            [--latency 0.2] [--slots 8] [--workers 16]
                            [--unchanged-only]

1. Seeds ``--gradings`` stored gradings the way they are made in service: submissions
   POSTed to a real ``sre-judge serve`` and graded by the simulated judge (at L = 0, so
   seeding is quick), which fills the judge cache.
2. Sets the judge to L = ``--latency``, C = ``--slots`` and starts a regrade job
   (``POST /v1/regrade-jobs``) with the same judge and rubric. Target: 0 judge calls.
3. Restarts the service with a copy of the rubric in which one question is reworded
   and regrades again with that rubric. Target: only that question re-asked, one
   question per grading. With ``SRE_JUDGE_JUDGE_ASKING=per_question`` (one call per
   question, cached per question) that is what happens; asking all questions in one
   call (``single``) re-asks every grading's whole call, nine questions.

``--unchanged-only`` stops after step 2 (the cache-hit fast path's figure alone).
Each asking mode (``--asking``, default both) runs on its own database. Wall times are
set against the ideal ``calls x L / C`` (the judge's limit); the reworded regrade's
target is a ratio to that ideal of at least ``REWORDED_RATIO_TARGET``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as `python bench/regrade.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, print_report
from bench.judge_sim import SimulatedJudge
from bench.service import (
    ServiceProcess,
    count_done,
    create_token,
    proc_cpu_seconds,
    submit_all,
)
from judge.rubric import DEFAULT_RUBRIC_DIR
from storage import make_engine

#: the question whose wording changes in step 3
REWORDED = "D2-Q1"
#: the reworded regrade's least ratio of the ideal wall time to the measured one
REWORDED_RATIO_TARGET = 0.90
_ENDED = ("done", "failed", "cancelled")


def reworded_rubrics(folder: Path) -> Path:
    """A copy of the shipped rubrics with the text of question ``REWORDED`` changed."""
    target = folder / "rubrics-reworded"
    shutil.copytree(DEFAULT_RUBRIC_DIR, target)
    path = target / "sregym-rca.yaml"
    text, count = re.subn(
        rf"(- id: {REWORDED}\n\s+text: )(.*)", r"\1\2 Judge by the diagnosis's own words.",
        path.read_text(encoding="utf-8"),
    )  # fmt: skip
    if count != 1:
        raise RuntimeError(f"question {REWORDED} not found in {path}")
    path.write_text(text, encoding="utf-8")
    return target


async def seed(url: str, service: ServiceProcess, token: str, count: int) -> float:
    """Submit ``count`` diagnoses and wait until all are graded; the seconds it took."""
    engine = make_engine(url)
    started = time.perf_counter()
    try:
        await submit_all(service.url, token, count, concurrency=32)
        while True:
            if (await count_done(engine))[0] >= count:
                break
            await asyncio.sleep(0.2)
    finally:
        engine.dispose()
    return time.perf_counter() - started


async def regrade(service: ServiceProcess, token: str, body: dict[str, Any]) -> dict[str, Any]:
    """Start a regrade job and poll it until it ends; the job, with ``seconds``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=60) as client:
        started, cpu = time.perf_counter(), proc_cpu_seconds(service.pid)
        response = await client.post("/v1/regrade-jobs", json=body)
        if response.status_code != 201:
            raise RuntimeError(f"POST /v1/regrade-jobs: {response.status_code} {response.text}")
        job = response.json()
        while job["state"] not in _ENDED:
            await asyncio.sleep(0.1)
            job = (await client.get(f"/v1/regrade-jobs/{job['id']}")).raise_for_status().json()
        job["seconds"] = time.perf_counter() - started
        job["cpu_seconds"] = proc_cpu_seconds(service.pid) - cpu  # the service's, polls included
    return dict(job)


async def run(args: argparse.Namespace, asking: str) -> dict[str, Any]:
    """Seed, regrade unchanged, regrade reworded in one asking mode; the raw figures."""
    figures: dict[str, Any] = {}
    with (
        bench_database(args.db) as url,
        SimulatedJudge(latency=0, slots=64) as judge,
        tempfile.TemporaryDirectory(prefix="srejudge-bench-") as folder,
    ):
        env = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": judge.spec(),
            "SRE_JUDGE_JUDGE_CONCURRENCY": str(args.slots),
            "SRE_JUDGE_WORKERS": str(args.workers),
            "SRE_JUDGE_JUDGE_ASKING": asking,
        }
        submitter, admin = create_token(env), create_token(env, "admin")
        body = {"judge": judge.spec(), "rubric": "sregym-rca", "mode": "shadow"}
        log = Path(args.log_dir or folder)
        with ServiceProcess(env, log / f"serve-regrade-{asking}-1.log") as service:
            figures["seed_seconds"] = await seed(url, service, submitter, args.gradings)
            judge.control(latency=args.latency, slots=args.slots, reset=True)
            figures["same"] = await regrade(service, admin, body)
            figures["same_judge"] = judge.stats()
            same = figures["same"]  # shown at once: the reworded step takes much longer
            print(f"{asking} unchanged: {same['seconds']:.2f} s, {same['cache_hits']} cache hits",
                  file=sys.stderr, flush=True)  # fmt: skip
        if args.unchanged_only:
            return figures
        env["SRE_JUDGE_RUBRIC_DIR"] = str(reworded_rubrics(Path(folder)))
        with ServiceProcess(env, log / f"serve-regrade-{asking}-2.log") as service:
            judge.control(reset=True)
            figures["reworded"] = await regrade(service, admin, body)
            figures["reworded_judge"] = judge.stats()
    return figures


def _figures(raw: dict[str, Any], args: argparse.Namespace, asking: str) -> list[Figure]:
    n, limit, m = args.gradings, args.slots / args.latency, asking
    same = raw["same"]
    calls_same = raw["same_judge"]["served"]
    unchanged = [
        Figure(f"{m}_seed_gradings_per_s", round(n / raw["seed_seconds"], 1), "/s", "L=0"),
        Figure(f"{m}_same_judge_calls", calls_same, "", "0", calls_same == 0),
        Figure(f"{m}_same_cache_hits", same["cache_hits"], "", f">= {n}", same["cache_hits"] >= n),
        Figure(f"{m}_same_wall_s", round(same["seconds"], 2), "s", "<= 10 s for 10,000"),
        Figure(f"{m}_same_service_cpu_ms_per_item", round(same["cpu_seconds"] / n * 1e3, 2), "ms"),
    ]
    if "reworded" not in raw:
        return unchanged
    reworded = raw["reworded"]
    calls = raw["reworded_judge"]["served"]
    asked = raw["reworded_judge"]["questions"] / n
    ideal = calls / limit
    ratio = ideal / reworded["seconds"]
    return [
        *unchanged,
        Figure(f"{m}_reworded_judge_calls", calls, "", f"{n} (one per grading)", calls == n),
        Figure(f"{m}_reworded_questions_per_grading", round(asked, 2), "", "1", asked <= 1),
        Figure(f"{m}_reworded_wall_s", round(reworded["seconds"], 1), "s", f"ideal {ideal:.1f} s"),
        Figure(
            f"{m}_reworded_ratio_to_ideal",
            round(ratio, 3),
            "",
            f">= {REWORDED_RATIO_TARGET:.2f}",
            ratio >= REWORDED_RATIO_TARGET,
        ),
        Figure(f"{m}_reworded_failed", reworded["failed"], "", "0", reworded["failed"] == 0),
    ]


def main() -> None:
    """Parse the options, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradings", type=int, default=10_000)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--asking", choices=("single", "per_question", "both"), default="both")
    parser.add_argument("--latency", type=float, default=0.2, help="judge seconds per call (L)")
    parser.add_argument("--slots", type=int, default=8, help="judge calls at once (C)")
    parser.add_argument("--workers", type=int, default=16, help="SRE_JUDGE_WORKERS")
    parser.add_argument("--log-dir", help="keep the server logs here (default: discarded)")
    parser.add_argument(
        "--unchanged-only", action="store_true", help="skip the reworded regrade (step 3)"
    )
    args = parser.parse_args()
    modes = ["single", "per_question"] if args.asking == "both" else [args.asking]
    figures = [f for mode in modes for f in _figures(asyncio.run(run(args, mode)), args, mode)]
    title = (
        f"Regrade of {args.gradings} stored gradings ({args.db}), judge L={args.latency:g} s, "
        f"C={args.slots}: unchanged, then {REWORDED} reworded"
    )
    print_report("regrade", title, figures, {"gradings": args.gradings})


if __name__ == "__main__":
    main()
