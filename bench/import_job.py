"""An import job of an SREGym archive: its time, its CPU, and how long the event loop waits.

    python bench/import_job.py [--runs 20] [--db sqlite|postgres]

Builds an archive of ``--runs`` copies of the test suite's synthetic SREGym run (45
attempts each, every row with a trace, registered scenarios as the ground truths: no
problems file), starts a runtime with its workers, uploads the archive as ``POST
/v1/imports`` does (``start_import``) and waits for the job to end. Meanwhile a ticker
task on the runtime's event loop notes the largest gap between its 1 ms sleeps: how long
a grading worker, a heartbeat or a request would have waited behind the import.
Prints the job's wall time, the process's CPU time (``time.process_time``, every thread)
and the loop's longest and 99th-percentile waits.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/import_job.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import Figure, bench_database, percentile, print_report
from tests.support.sregym_results import PROBLEMS, RUN, write_sregym_results


def archive(runs: int, folder: Path) -> bytes:
    """A tar.gz of ``runs`` copies of the synthetic run, every row with a trace."""
    fixture = write_sregym_results(folder, traces=True)
    first = fixture.root / RUN
    for n in range(1, runs):
        shutil.copytree(first, fixture.root / f"2025-07-{n % 28 + 1:02d}_{n % 24:02d}-00-00")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(fixture.root.rglob("*.csv")):
            tar.add(path, arcname=path.relative_to(fixture.root).as_posix())
    return buffer.getvalue()


async def _run(url: str, data: bytes, folder: Path) -> dict[str, Any]:
    from api.imports.jobs import import_job, start_import
    from api.service.runtime import Runtime
    from api.service.settings import Settings

    settings = Settings(database_url=url, judge="scripted:pass", secret_key_file=folder / "key")
    async with Runtime(settings, workers=True, import_jobs=True, migrate=True) as runtime:
        services = runtime.services
        for problem_id, truth in PROBLEMS.items():
            await services.store.catalog.create_scenario(
                id=problem_id, ground_truth=truth or "[control] no fault", actor="bench"
            )
        gaps: list[float] = []
        running = True

        async def tick() -> None:
            last = time.perf_counter()
            while running:
                await asyncio.sleep(0.001)
                now = time.perf_counter()
                gaps.append(now - last)
                last = now

        ticker = asyncio.ensure_future(tick())
        started, cpu = time.perf_counter(), time.process_time()
        job = await start_import(services, data, "application/gzip", rubric=None, actor="bench")
        view = await import_job(services, job.id)
        for _ in range(36_000):  # polled as a client would, for at most an hour
            if view.state in ("done", "failed"):
                break
            await asyncio.sleep(0.1)
            view = await import_job(services, job.id)
        wall, spent = time.perf_counter() - started, time.process_time() - cpu
        running = False
        await ticker
    return {"state": view.state, "rows": view.done, "wall": wall, "cpu": spent, "gaps": gaps}


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, bench_database(args.db) as url:
        data = archive(args.runs, Path(folder) / "results")
        measured = asyncio.run(_run(url, data, Path(folder)))
    gaps = [gap * 1000 for gap in measured["gaps"]]
    figures = [
        Figure("job state", measured["state"]),
        Figure("rows imported", measured["rows"]),
        Figure("archive", len(data) / 1e6, "MB"),
        Figure("job wall time", measured["wall"], "s"),
        Figure("process CPU during the job", measured["cpu"], "s"),
        Figure("event loop's longest wait", max(gaps), "ms"),
        Figure("event loop's 99th-percentile wait", percentile(gaps, 0.99), "ms"),
    ]
    title = f"Import job of {args.runs} SREGym runs ({args.db})"
    print_report("import_job", title, figures, {"runs": args.runs, "db": args.db})


if __name__ == "__main__":
    main()
