"""CPU per SQL statement on SQLite through each layer the service could use.

    python bench/statement_cost.py [--statements 3000] [--runs 5]

The storage path of a grading is about 20 statements (docs/benchmarks.md). This
measures what one statement costs, in CPU microseconds (``time.process_time``, every
thread of the process) on a SQLite file in WAL mode, for the same work through:

- ``sqlite3``: the standard library's driver, one connection, no SQLAlchemy;
- ``sqlalchemy sync``: SQLAlchemy Core on that driver (compiled-statement cache on);
- ``sqlalchemy session``: an ORM ``Session`` over the same statements, as the
  service's use cases run (``Database.run``, in a worker thread).

The work is the service's usual mix, in transactions of ten statements: an INSERT of
one row, then a SELECT of it by primary key, alternately. ``--statements`` is a multiple
of ten, so every run is whole transactions and the CPU is divided by the statements run.
The figures say how much of a grading's CPU the driver layer costs.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as `python bench/statement_cost.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import Column, Integer, MetaData, String, Table, create_engine, insert, select
from sqlalchemy.orm import sessionmaker

from bench.common import Figure, print_report

_PER_TRANSACTION = 10
_METADATA = MetaData()
_ROWS = Table(
    "rows",
    _METADATA,
    Column("id", String, primary_key=True),
    Column("text", String, nullable=False),
    Column("n", Integer, nullable=False),
)
_CREATE = "CREATE TABLE IF NOT EXISTS rows (id TEXT PRIMARY KEY, text TEXT NOT NULL, n INTEGER)"


def transactions(count: int) -> range:
    """The first statement's number of each transaction of a run of ``count`` statements;
    ValueError unless ``count`` is a positive multiple of ten (a run divides its CPU by
    ``count``: it must run exactly that many)."""
    if count <= 0 or count % _PER_TRANSACTION:
        raise ValueError(f"a positive multiple of {_PER_TRANSACTION} statements, not {count}")
    return range(0, count, _PER_TRANSACTION)


def _statement_count(text: str) -> int:
    """``--statements``: checked as :func:`transactions` checks it."""
    try:
        count = int(text)
        transactions(count)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return count


def _row(n: int) -> dict[str, object]:
    return {"id": f"row-{n:08d}", "text": "a diagnosis of some length " * 8, "n": n}


def _raw(path: Path, count: int) -> float:
    """The standard library's driver; CPU seconds of the statements."""
    starts = transactions(count)
    db = sqlite3.connect(path, isolation_level=None)
    started = time.process_time()
    for first in starts:
        db.execute("BEGIN IMMEDIATE")
        for n in range(first, first + _PER_TRANSACTION, 2):
            row = _row(n)
            db.execute("INSERT INTO rows (id, text, n) VALUES (:id, :text, :n)", row)
            db.execute("SELECT id, text, n FROM rows WHERE id = ?", (row["id"],)).fetchall()
        db.execute("COMMIT")
    spent = time.process_time() - started
    db.close()
    return spent


def _sync(path: Path, count: int) -> float:
    """SQLAlchemy Core on the standard library's driver; CPU seconds of the statements."""
    starts = transactions(count)
    engine = create_engine(f"sqlite:///{path}")
    started = time.process_time()
    for first in starts:
        with engine.begin() as connection:
            for n in range(first, first + _PER_TRANSACTION, 2):
                row = _row(n)
                connection.execute(insert(_ROWS), row)
                connection.execute(select(_ROWS).where(_ROWS.c.id == row["id"])).all()
    spent = time.process_time() - started
    engine.dispose()
    return spent


def _session(path: Path, count: int) -> float:
    """SQLAlchemy's ORM ``Session`` over Core statements, as the service's use cases run
    (``Database.run``); CPU seconds."""
    starts = transactions(count)
    engine = create_engine(f"sqlite:///{path}")
    sessions = sessionmaker(engine)
    started = time.process_time()
    for first in starts:
        with sessions() as session, session.begin():
            for n in range(first, first + _PER_TRANSACTION, 2):
                row = _row(n)
                session.execute(insert(_ROWS), row)
                session.execute(select(_ROWS).where(_ROWS.c.id == row["id"])).all()
    spent = time.process_time() - started
    engine.dispose()
    return spent


LAYERS: dict[str, Callable[[Path, int], float]] = {
    "sqlite3": _raw,
    "sqlalchemy_sync": _sync,
    "sqlalchemy_session": _session,
}


def new_database(path: Path) -> Path:
    """A database file in WAL mode (the mode persists in the file) with the table."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(_CREATE)
    db.close()
    return path


def _microseconds(layer: Callable[[Path, int], float], count: int) -> float:
    """CPU microseconds per statement for one run on a new database file."""
    with tempfile.TemporaryDirectory(prefix="srejudge-stmt-") as folder:
        layer(new_database(Path(folder) / "warm.db"), _PER_TRANSACTION)  # imports, set-up
        return layer(new_database(Path(folder) / "measured.db"), count) / count * 1e6


def main() -> None:
    """Run every layer ``--runs`` times, interleaved; print median and spread."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--statements", type=_statement_count, default=3000, help="a multiple of 10"
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    results: dict[str, list[float]] = {name: [] for name in LAYERS}
    for _ in range(args.runs):
        for name, layer in LAYERS.items():
            results[name].append(_microseconds(layer, args.statements))
    figures = []
    for name, values in results.items():
        spread = f"{min(values):,.0f}-{max(values):,.0f} us over {args.runs} runs"
        figures.append(Figure(f"{name}_us_per_statement", statistics.median(values), "us", spread))
    ratio = statistics.median(results["sqlalchemy_session"]) / statistics.median(
        results["sqlalchemy_sync"]
    )
    figures.append(Figure("session_to_core_ratio", round(ratio, 2), "x"))
    title = f"CPU per statement on SQLite, {args.statements} statements per run"
    print_report("statement_cost", title, figures, {"statements": args.statements})


if __name__ == "__main__":
    main()
