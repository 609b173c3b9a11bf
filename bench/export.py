"""What an export of many gradings costs the server: wall time, first byte, peak memory.

    python bench/export.py [--gradings 10000] [--db sqlite|postgres] [--formats jsonl,csv,sregym]
                           [--database URL] [--baseline DIR]

Seeds ``--gradings`` graded submissions through the store (the benchmark's diagnosis
texts, nine answers each; grading them through a judge would take longer than the
exports measured), then, for each format,
starts a fresh server and downloads ``GET /v1/exports/gradings`` once: seconds to the
response's headers and to its last byte, its size, and the server's peak RSS (``VmHWM``)
before and after. The export is written whole before the answer starts (memory up to
8 MiB, then a temporary file), so the first byte comes late and the memory stays flat;
the answer's ``X-Export-Rows`` and ``Repr-Digest`` are checked against what arrived.
Meanwhile a second client asks ``GET /healthz`` every 20 ms: its slowest answer (and
99th percentile) is how long any request or grading of the server waited behind the
export.
``--baseline DIR`` also downloads each format from a server running the code in ``DIR``
(another checkout, e.g. ``git archive`` of an older commit; run the script from outside
the checkout, so that ``DIR`` comes first on the server's path), on the same data.
``--database URL`` uses (and tops up) that database and keeps it, with its service key
(:func:`kept_key_file`), so a later run on it finds its audit log keyed as before.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import hashlib
import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import make_url, text

if __package__ in (None, ""):  # run as `python bench/export.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.service.secret_key import key_for_database
from api.service.settings import Settings
from bench.common import Figure, bench_database, percentile, print_report
from bench.service import ServiceProcess, create_token, proc_memory_kib, submission_body
from storage import Store, make_engine
from tests.storage.helpers import graded_result, new_submission, submit


async def _health_waits(url: str, done: asyncio.Event) -> list[float]:
    """Seconds each ``GET /healthz`` took, asked every 20 ms until ``done``."""
    waits: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while not done.is_set():
            started = time.perf_counter()
            await client.get("/healthz")
            waits.append(time.perf_counter() - started)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout=0.02)
    return waits


async def download(service: ServiceProcess, token: str, fmt: str) -> dict[str, Any]:
    """One export streamed to nowhere: timings, size, digest check, the server's memory,
    and how long ``/healthz`` waited meanwhile."""
    headers = {"Authorization": f"Bearer {token}"}
    before = proc_memory_kib(service.pid)
    digest = hashlib.sha256()
    size = 0
    done = asyncio.Event()
    probing = asyncio.ensure_future(_health_waits(service.url, done))
    async with httpx.AsyncClient(base_url=service.url, headers=headers, timeout=600) as client:
        started = time.perf_counter()
        async with client.stream("GET", "/v1/exports/gradings", params={"format": fmt}) as answer:
            first = time.perf_counter() - started
            if answer.status_code != 200:
                raise RuntimeError(f"export {fmt}: {answer.status_code} {await answer.aread()!r}")
            async for chunk in answer.aiter_raw():
                digest.update(chunk)
                size += len(chunk)
        seconds = time.perf_counter() - started
    done.set()
    waits = [wait * 1000 for wait in await probing] or [float("nan")]
    stated = answer.headers.get("repr-digest")
    shown = f"sha-256=:{base64.b64encode(digest.digest()).decode()}:"
    return {
        "first_byte_s": first,
        "seconds": seconds,
        "mib": size / 2**20,
        "rows": answer.headers.get("x-export-rows"),
        "digest_ok": None if stated is None else stated == shown,
        "rss_before_mib": before["VmRSS"] / 1024,
        "peak_rss_mib": proc_memory_kib(service.pid)["VmHWM"] / 1024,
        "healthz_max_ms": max(waits),
        "healthz_p99_ms": percentile(waits, 0.99),
        "healthz_median_ms": percentile(waits, 0.5),
        "healthz_asked": len(waits),
    }


async def seed(url: str, count: int, *, key_file: Path) -> float:
    """Top the database up to ``count`` graded submissions (all nine yes); the seconds
    taken. The store keys its audit rows with the deployment's key (``key_file``, the
    service's ``SRE_JUDGE_SECRET_KEY_FILE``), so the servers started after accept them."""
    engine = make_engine(url)
    started = time.perf_counter()
    try:
        with engine.connect() as connection:
            have = (connection.execute(text("SELECT count(*) FROM grading"))).scalar_one()
        settings = Settings(database_url=url, secret_key_file=key_file)
        store = Store(engine, key=key_for_database(settings, engine))
        for n in range(have, count):
            body = submission_body(n)
            await submit(store, new_submission(body.pop("diagnosis"), **body))
        result = graded_result()
        for claim in await store.queue.claim_pending("bench", limit=count, lease_seconds=3600):
            await store.queue.complete(claim.grading_id, "bench", result)
    finally:
        engine.dispose()
    return time.perf_counter() - started


def kept_key_file(url: str) -> Path:
    """The service key of a database kept across runs (``--database``): the file
    ``SRE_JUDGE_SECRET_KEY_FILE`` names when set, else beside the database: ``bench.db.key``
    for a SQLite file, ``<name>.key`` in the working directory for a server's database.
    The first run makes it."""
    configured = os.environ.get("SRE_JUDGE_SECRET_KEY_FILE")
    if configured:
        return Path(configured).resolve()
    return Path(f"{make_url(url).database or 'sre-judge'}.key").resolve()


async def run(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Seed once, then one fresh server per format; the raw figures per format."""
    results: dict[str, dict[str, Any]] = {}
    database = nullcontext(args.database) if args.database else bench_database(args.db)
    with database as url, tempfile.TemporaryDirectory(prefix="srejudge-bench-") as folder:
        key_file = kept_key_file(url) if args.database else Path(folder) / "sre-judge.key"
        env = {
            "SRE_JUDGE_DATABASE_URL": url,
            "SRE_JUDGE_JUDGE": "scripted:pass",
            "SRE_JUDGE_SECRET_KEY_FILE": str(key_file),
        }
        admin = create_token(env, "admin")
        seconds = await seed(url, args.gradings, key_file=key_file)
        print(f"seeded {args.gradings} gradings in {seconds:.0f} s")
        versions = {"": env}
        if args.baseline:
            versions["base_"] = {**env, "PYTHONPATH": args.baseline}
        for fmt in args.formats.split(","):
            for prefix, version in versions.items():
                with ServiceProcess(version, Path(folder) / f"serve-{prefix}{fmt}.log") as service:
                    results[f"{prefix}{fmt}"] = await download(service, admin, fmt)
                print(f"{prefix}{fmt}: {results[f'{prefix}{fmt}']}", file=sys.stderr, flush=True)
    return results


def _figures(results: dict[str, dict[str, Any]], gradings: int) -> list[Figure]:
    figures = []
    for fmt, r in results.items():
        rows_ok = None if r["rows"] is None else int(r["rows"]) == gradings
        figures += [
            Figure(f"{fmt}_seconds", round(r["seconds"], 2), "s"),
            Figure(f"{fmt}_first_byte_s", round(r["first_byte_s"], 2), "s"),
            Figure(f"{fmt}_mib", round(r["mib"], 1), "MiB"),
            Figure(f"{fmt}_rss_before_mib", round(r["rss_before_mib"], 1), "MiB"),
            Figure(f"{fmt}_peak_rss_mib", round(r["peak_rss_mib"], 1), "MiB"),
            Figure(f"{fmt}_healthz_max_ms", round(r["healthz_max_ms"], 1), "ms"),
            Figure(f"{fmt}_healthz_p99_ms", round(r["healthz_p99_ms"], 1), "ms"),
            Figure(f"{fmt}_rows_stated", r["rows"], "", str(gradings), rows_ok),
            Figure(f"{fmt}_digest_ok", r["digest_ok"], "", "True", r["digest_ok"]),
        ]
    return figures


def main() -> None:
    """Parse the options, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gradings", type=int, default=10_000)
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--formats", default="jsonl,csv,sregym")
    parser.add_argument("--baseline", help="also measure the code of this checkout")
    parser.add_argument(
        "--database",
        help="use (and top up) this database URL, kept after with its service key "
        "(SRE_JUDGE_SECRET_KEY_FILE, else beside the database)",
    )
    args = parser.parse_args()
    args.baseline = args.baseline and str(Path(args.baseline).resolve())
    results = asyncio.run(run(args))
    title = f"Export of {args.gradings} gradings ({args.db}): one download per format"
    print_report("export", title, _figures(results, args.gradings), {"gradings": args.gradings})


if __name__ == "__main__":
    main()
