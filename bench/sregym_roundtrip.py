"""What the SREGym round trip costs: import a results folder, export it back, check it.

    python bench/sregym_roundtrip.py [--runs 20] [--db sqlite|postgres] [--repeat 3]

Writes ``--runs`` copies of the test suite's synthetic SREGym run (45 attempts each:
3 agents x 5 problems x 3 attempts, one timed out, one failed deploy, one empty) into
one results folder, imports it through the store (keeping every original row), then
writes it back in SREGym's folder layout and as one file, ``--repeat`` times each, and
checks the folder export is byte for byte the input. Prints seconds per step (median
and spread of the repeats) and attempts per second.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

from api.imports.queries import ImportQueries

if __package__ in (None, ""):  # run as `python bench/sregym_roundtrip.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from api.imports.problems import read_problems
from api.imports.sregym import read_sregym_folder
from api.reports.filters import ReportFilter
from api.reports.sregym_writer import write_sregym_file, write_sregym_folder
from bench.common import Figure, bench_database, print_report
from storage import Store, make_engine, upgrade
from tests.storage.helpers import sregym_rubric
from tests.support.sregym_results import write_sregym_results


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}


async def _timed(repeat: int, step: object) -> list[float]:
    seconds = []
    for n in range(repeat):
        started = time.perf_counter()
        await step(n)  # type: ignore[operator]
        seconds.append(time.perf_counter() - started)
    return seconds


async def run(url: str, runs: int, repeat: int, base: Path) -> list[Figure]:
    """Import, export twice per repeat; the figures."""
    for n in range(runs):
        fixture = write_sregym_results(base, run=f"2025-06-{1 + n // 24:02d}_{n % 24:02d}-00-00")
    await upgrade(url)
    engine = make_engine(url)
    store = Store(engine)
    rubric = sregym_rubric()
    current = {rubric.id: rubric}  # the rubric file's current version, as the service reads it
    try:
        problems = read_problems(fixture.problems_file)
        started = time.perf_counter()
        report = await ImportQueries(store.db, store.catalog).sregym(
            read_sregym_folder(fixture.root), problems, rubric=rubric
        )
        imported = time.perf_counter() - started

        async def folder(n: int) -> None:
            await write_sregym_folder(store, ReportFilter(), base / f"out-{n}", current=current)

        async def one_file(n: int) -> None:
            await write_sregym_file(store, ReportFilter(), io.BytesIO(), current=current)

        folder_s = await _timed(repeat, folder)
        file_s = await _timed(repeat, one_file)
        identical = _files(base / "out-0") == _files(fixture.root)
    finally:
        engine.dispose()
    rows = report.submissions
    return [
        Figure("attempts", rows),
        Figure("import_s", imported, "s"),
        Figure("import_attempts_per_s", rows / imported, "/s"),
        Figure("export_folder_median_s", statistics.median(folder_s), "s"),
        Figure("export_folder_spread_s", max(folder_s) - min(folder_s), "s"),
        Figure("export_file_median_s", statistics.median(file_s), "s"),
        Figure("export_file_spread_s", max(file_s) - min(file_s), "s"),
        Figure("folder_identical", identical, target="True", met=identical),
    ]


def main() -> None:
    """Parse the options, run, print the table and the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    options = parser.parse_args()
    with bench_database(options.db) as url, tempfile.TemporaryDirectory() as folder:
        figures = asyncio.run(run(url, options.runs, options.repeat, Path(folder)))
    title = f"SREGym round trip ({options.db}, {options.runs} runs)"
    print_report("sregym_roundtrip", title, figures, {"db": options.db})


if __name__ == "__main__":
    main()
