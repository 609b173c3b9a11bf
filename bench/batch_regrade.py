"""What the offline batch exchange costs the service: a regrade of N gradings through
``engine: offline`` against the same regrade live.

    python bench/batch_regrade.py [--gradings 2000] [--db sqlite|postgres] [--workers 16]

1. Seeds ``--gradings`` gradings through a real ``sre-judge serve`` and the simulated
   judge (``bench/judge_sim.py``, L = 0).
2. Starts an offline regrade with another judge model (so the judge cache answers
   nothing) and times each phase the service does: rendering the requests file
   (``GET .../batch-requests``), importing the results file (``POST .../batch-results``;
   the results are made at once by the simulated judge's reply builder, standing in for
   the GPU fleet, whose time is not the service's) and grading every item from the kept
   replies until the job is done.
3. Regrades the same gradings live with a third judge model at L = 0 (the judge costs
   nothing: what is left is the service's own work per item).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # run as `python bench/batch_regrade.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, print_report
from bench.judge_sim import SimulatedJudge, build_reply
from bench.regrade import regrade, seed
from bench.service import ServiceProcess, create_token, proc_cpu_seconds

_ENDED = ("done", "failed", "cancelled")


def results_of(requests_text: str) -> tuple[str, int]:
    """A results file for a requests file, as a batch runner writes it; its line count."""
    out = []
    for n, raw in enumerate(requests_text.splitlines()):
        line = json.loads(raw)
        body = line["body"]
        text = build_reply(body)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in body["messages"])
        completion = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(text) // 4},
        }
        response = {"status_code": 200, "request_id": f"r{n}", "body": completion}
        out.append(
            json.dumps({"id": f"b{n}", "custom_id": line["custom_id"], "response": response})
        )
    return "".join(f"{line}\n" for line in out), len(out)


async def offline(service: ServiceProcess, token: str, judge: str) -> dict[str, Any]:
    """An offline regrade, each phase timed."""
    headers = {"Authorization": f"Bearer {token}"}
    figures: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=600) as client:
        cpu, started = proc_cpu_seconds(service.pid), time.perf_counter()
        body = {"judge": judge, "rubric": "sregym-rca", "mode": "shadow", "engine": "offline"}
        job = (await client.post("/v1/regrade-jobs", json=body)).raise_for_status().json()
        t = time.perf_counter()
        requests_text = (
            (await client.get(f"/v1/regrade-jobs/{job['id']}/batch-requests"))
            .raise_for_status()
            .text
        )
        figures["render_s"] = time.perf_counter() - t
        results, figures["requests"] = results_of(requests_text)
        figures["requests_mib"] = len(requests_text.encode()) / 2**20
        t = time.perf_counter()
        imported = await client.post(
            f"/v1/regrade-jobs/{job['id']}/batch-results",
            content=results.encode(),
            headers={"Content-Type": "application/jsonl"},
        )
        figures["import_s"] = time.perf_counter() - t
        figures["answered"] = imported.raise_for_status().json()["answered"]
        t = time.perf_counter()
        while job["state"] not in _ENDED:
            await asyncio.sleep(0.1)
            job = (await client.get(f"/v1/regrade-jobs/{job['id']}")).raise_for_status().json()
        figures["grade_s"] = time.perf_counter() - t
        figures["seconds"] = time.perf_counter() - started
        figures["cpu_seconds"] = proc_cpu_seconds(service.pid) - cpu
        figures["job"] = job
    return figures


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Seed, regrade offline, regrade live; the raw figures."""
    raw: dict[str, Any] = {}
    with (
        bench_database(args.db) as url,
        SimulatedJudge(latency=0, slots=64) as judge,
        tempfile.TemporaryDirectory(prefix="srejudge-bench-") as folder,
    ):
        env = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": judge.spec(),
            "SRE_JUDGE_JUDGE_CONCURRENCY": "64",
            "SRE_JUDGE_WORKERS": str(args.workers),
        }
        submitter, admin = create_token(env), create_token(env, "admin")
        with ServiceProcess(env, Path(folder) / "serve.log") as service:
            raw["seed_seconds"] = await seed(url, service, submitter, args.gradings)
            judge.control(reset=True)
            raw["offline"] = await offline(
                service, admin, f"openai:bench-offline@{judge.openai_url}"
            )
            raw["offline_judge_calls"] = judge.stats()["served"]
            body = {"judge": f"openai:bench-live@{judge.openai_url}", "rubric": "sregym-rca"}
            raw["live"] = await regrade(service, admin, body)
    return raw


def main() -> None:
    """Parse the options, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradings", type=int, default=2000)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--workers", type=int, default=16, help="SRE_JUDGE_WORKERS")
    args = parser.parse_args()
    raw = asyncio.run(run(args))
    n, off, live = args.gradings, raw["offline"], raw["live"]
    job = off["job"]
    figures = [
        Figure(
            "offline_requests", off["requests"], "", f"{n} (one per grading)", off["requests"] == n
        ),
        Figure("offline_requests_file_mib", round(off["requests_mib"], 1), "MiB"),
        Figure("offline_render_s", round(off["render_s"], 2), "s"),
        Figure("offline_import_s", round(off["import_s"], 2), "s"),
        Figure("offline_grade_s", round(off["grade_s"], 2), "s"),
        Figure("offline_total_s", round(off["seconds"], 2), "s"),
        Figure("offline_service_cpu_ms_per_grading", round(off["cpu_seconds"] / n * 1e3, 2), "ms"),
        Figure("offline_done", job["done"], "", f"{n}", job["done"] == n),
        Figure(
            "offline_live_judge_calls",
            raw["offline_judge_calls"],
            "",
            "0",
            raw["offline_judge_calls"] == 0,
        ),
        Figure("live_L0_total_s", round(live["seconds"], 2), "s"),
        Figure("live_L0_service_cpu_ms_per_grading", round(live["cpu_seconds"] / n * 1e3, 2), "ms"),
    ]
    title = (
        f"Offline batch regrade of {n} gradings ({args.db}) against the same regrade live at L=0"
    )
    print_report("batch_regrade", title, figures, {"gradings": n})


if __name__ == "__main__":
    main()
