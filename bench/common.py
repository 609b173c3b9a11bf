"""What the benchmark scripts share: the report (a table and one JSON line), databases,
percentiles and the machine's state.

Every script prints its figures as a table, each figure beside its target and whether
it was met, then the same figures as one JSON line (the last line of its output), so a
person reads the table and a script reads ``tail -n 1``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

__all__ = [
    "POSTGRES_ADMIN_URL",
    "Figure",
    "bench_database",
    "callgrind_instructions",
    "callgrind_switch",
    "machine",
    "percentile",
    "print_report",
]

#: where the benchmarks create and drop their PostgreSQL databases (trust auth)
POSTGRES_ADMIN_URL = os.environ.get(
    "SRE_JUDGE_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres"
)


@dataclass(frozen=True)
class Figure:
    """One measured figure, its target (if any) and whether it met it."""

    name: str
    value: Any
    unit: str = ""
    target: str = ""
    met: bool | None = None

    def shown(self) -> str:
        """The value as the table shows it."""
        if isinstance(self.value, float):
            text = f"{self.value:,.3f}" if abs(self.value) < 10 else f"{self.value:,.1f}"
        else:
            text = str(self.value)
        return f"{text} {self.unit}".strip()


def machine() -> dict[str, Any]:
    """Cores and load average when the figures were taken (they are noisy under load)."""
    load = os.getloadavg()
    return {"cores": os.cpu_count(), "load_1m": round(load[0], 2), "load_5m": round(load[1], 2)}


def percentile(values: Sequence[float], share: float) -> float:
    """The ``share`` quantile (0..1) of ``values``, by linear interpolation."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    cuts = statistics.quantiles(values, n=1000, method="inclusive")
    index = min(len(cuts) - 1, max(0, round(share * 1000) - 1))
    return float(cuts[index])


def print_report(
    bench: str, title: str, figures: Sequence[Figure], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Print the table, then one JSON line with every figure; return that object."""
    table = Table(title=title, title_justify="left")
    for column in ("figure", "value", "target", "met"):
        table.add_column(column, justify="right" if column == "value" else "left")
    for figure in figures:
        met = "" if figure.met is None else ("yes" if figure.met else "NO")
        table.add_row(figure.name, figure.shown(), figure.target, met)
    Console(highlight=False).print(table)
    line: dict[str, Any] = {"bench": bench, "machine": machine()}
    for figure in figures:
        line[figure.name] = figure.value
        if figure.met is not None:
            line[f"{figure.name}_met"] = figure.met
    line.update(extra or {})
    print(json.dumps(line), flush=True)
    return line


def _postgres_url(name: str) -> str:
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    return f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"


@contextmanager
def bench_database(kind: str) -> Iterator[str]:
    """A new, empty database for one run: a SQLite file, or ``srejudge_bench_*`` on PostgreSQL.

    Dropped (or deleted) afterwards.
    """
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="srejudge-bench-") as folder:
            yield f"sqlite:///{Path(folder) / 'bench.db'}"
        return
    if kind != "postgres":
        raise ValueError(f"unknown database kind {kind!r} (sqlite or postgres)")
    import psycopg

    name = f"srejudge_bench_{secrets.token_hex(4)}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _postgres_url(name)
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        # the service's default audit checkpoints of that database (beside the key file,
        # in the working directory) go with it
        for leftover in (f"{name}.checkpoints.jsonl", f".{name}.checkpoints.jsonl.lock"):
            Path(leftover).unlink(missing_ok=True)


def callgrind_switch(*args: str) -> None:
    """``callgrind_control ARGS`` on this process (``-i on`` / ``-i off``): a script run
    under callgrind counts only the part between the two."""
    subprocess.run(["callgrind_control", *args, str(os.getpid())], check=True, capture_output=True)


def callgrind_instructions(script: str, *args: str) -> int:
    """Instructions counted by one run of ``python SCRIPT ARGS`` under callgrind, with
    instrumentation off until the script switches it on (:func:`callgrind_switch`)."""
    with tempfile.TemporaryDirectory() as folder:
        command = [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={Path(folder) / 'callgrind.out'}",
            sys.executable,
            script,
            *args,
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind run failed: {done.stderr[-2000:]}")
    return int(found.group(1))
