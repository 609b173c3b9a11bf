"""The service's own CPU per grading, without HTTP: in milliseconds and in instructions.

    python bench/cpu_per_grading.py [--db sqlite|postgres] [--gradings 300] [--runs 3]
                                    [--truth inline|scenario]
                                    [--callgrind] [--callgrind-gradings 60]

One process accepts ``--gradings`` submissions through the application layer (checks,
redaction, the submission's transaction) and grades them with the workers and the
in-process scripted judge (claim, prompt, parse, evidence, rule, the completion's
transaction, audit): the path of a grading minus uvicorn and Litestar. It learns that
the queue is drained from a count on a connection of its own, so the figures of the
path hold nothing else. Then it reads each grading once as ``GET /v1/gradings/{id}``
does, measured apart. CPU time is ``time.process_time`` of each phase (so other work on
a shared machine changes it less than wall time), reported as median and spread over
``--runs`` runs.

``--truth``: ``inline`` (the default) sends each ground truth with its submission, as
an admin; ``scenario`` submits as a submitter token against 20 registered scenarios, the
harness's usual path (the scenario read and the attempts counted at intake).

``--callgrind`` also runs one measurement under ``valgrind --tool=callgrind`` with
instrumentation off during start-up and warm-up and switched on (``callgrind_control
-i on``) for the measured gradings only: instructions per grading do not depend on the
machine's load (``perf stat -e instructions`` is not supported on this machine).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/cpu_per_grading.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    Figure,
    bench_database,
    callgrind_instructions,
    callgrind_switch,
    print_report,
)
from bench.service import TRUTH, submission_body

_WARMUP = 20
#: the ground truths ``submission_body`` sends: with ``--truth scenario``, a scenario each
_TRUTHS = [TRUTH.format(k=k) for k in range(20)]


def _body(n: int, truth: str) -> dict[str, Any]:
    """The ``n``-th submission, its ground truth inline or its scenario's id."""
    body = submission_body(n)
    if truth == "scenario":
        body["scenario_id"] = f"bench/geo-{n % len(_TRUTHS)}"
        del body["ground_truth"]
    return body


async def _register_scenarios(runtime: Any) -> None:
    for k, text in enumerate(_TRUTHS):
        await runtime.services.store.catalog.create_scenario(
            id=f"bench/geo-{k}", ground_truth=text, scenario_set="public", actor="bench"
        )


async def _grade_all(
    runtime: Any, principal: Any, first: int, count: int, truth: str = "inline"
) -> list[str]:
    """Accept ``count`` submissions, then wait until the workers graded them all (a count
    of the pending ones, on a connection that is not the service's); their ids."""
    from sqlalchemy import func, select

    from api.grading.intake import accept_submission
    from api.service.schemas import SubmissionCreate
    from storage import GradingRecord, make_engine

    ids = []
    for n in range(first, first + count):
        data = SubmissionCreate.model_validate(_body(n, truth))
        accepted = await accept_submission(runtime.services, data, principal=principal)
        ids.append(accepted.outcome.grading.id)
    pending = select(func.count()).where(GradingRecord.status == "pending")
    watcher = make_engine(runtime.settings.database_url)
    try:
        deadline = time.monotonic() + 120
        while True:
            with watcher.connect() as connection:
                if connection.execute(pending).scalar_one() == 0:
                    return ids
            if time.monotonic() > deadline:
                raise TimeoutError("gradings still pending after 120 s")
            await asyncio.sleep(0.02)
    finally:
        watcher.dispose()


async def _read_all(runtime: Any, ids: list[str]) -> None:
    """Read each grading once, as ``GET /v1/gradings/{id}`` (or a wait that ends) does."""
    for grading_id in ids:
        view = await runtime.services.store.gradings.get(grading_id)
        if view is None or view.grading.status == "pending":
            raise RuntimeError(f"grading {grading_id} is not graded")


class _Statements:
    """Statements the engine sends through a cursor, and transactions begun, while
    counting is on. On SQLite the ``BEGIN`` that ``storage.engine`` issues is one of the
    statements; a transaction's ``COMMIT`` is the driver's ``commit()``, not a statement
    sent, so it is not among them: it shows as the transaction, counted apart."""

    def __init__(self, engine: Any) -> None:
        from sqlalchemy import event

        self.statements = self.transactions = 0
        self.on = False
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "begin", self._begin)

    def _statement(self, *_args: Any) -> None:
        self.statements += self.on

    def _begin(self, *_args: Any) -> None:
        self.transactions += self.on


#: per grading: CPU seconds, statements, transactions; then the same per read of one
Measured = tuple[float, float, float, float, float, float]


async def _measure(url: str, count: int, toggle: bool, truth: str) -> Measured:
    """CPU seconds, statements and transactions per grading over ``count`` gradings after
    a warm-up (intake, claim, grade, store), then per read of one of them. Statements
    count what the engine sends through a cursor (BEGIN included on SQLite); a COMMIT
    is a driver call, counted once per transaction in the transactions (:class:`_Statements`)."""
    from api.service.principal import Principal
    from api.service.runtime import Runtime
    from api.service.settings import Settings

    folder = tempfile.mkdtemp(prefix="srejudge-cpu-")
    settings = Settings(
        database_url=url,
        judge="scripted:pass",
        secret_key_file=Path(folder) / "key",
        judge_concurrency=8,
        # counted at every submission, never reached
        submitter_attempts_per_scenario_per_hour=1_000_000,
    )
    role = "submitter" if truth == "scenario" else "admin"
    principal = Principal(id="bench", name="bench", role=role)
    async with Runtime(settings, workers=True, migrate=True) as runtime:
        if truth == "scenario":
            await _register_scenarios(runtime)
        counted = _Statements(runtime.engine)
        await _read_all(runtime, await _grade_all(runtime, principal, 0, _WARMUP, truth))
        if toggle:
            callgrind_switch("-i", "on")
        counted.on = True
        started = time.process_time()
        ids = await _grade_all(runtime, principal, _WARMUP, count, truth)
        spent = time.process_time() - started
        counted.on = False
        if toggle:
            callgrind_switch("-i", "off")
        graded = (spent / count, counted.statements / count, counted.transactions / count)
        counted.statements = counted.transactions = 0
        counted.on = True
        started = time.process_time()
        await _read_all(runtime, ids)
        spent = time.process_time() - started
        counted.on = False
    shutil.rmtree(folder, ignore_errors=True)
    return (*graded, spent / count, counted.statements / count, counted.transactions / count)


def _one_run(db: str, count: int, toggle: bool, truth: str) -> Measured:
    with bench_database(db) as url:
        return asyncio.run(_measure(url, count, toggle, truth))


def _instructions(db: str, count: int, truth: str) -> float:
    """Instructions per grading from one run under callgrind (instrumented part only)."""
    counted = callgrind_instructions(
        __file__, "--inner", "--db", db, "--gradings", str(count), "--truth", truth
    )
    return counted / count


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", default="sqlite", choices=["sqlite", "postgres"])
    parser.add_argument("--gradings", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--truth", default="inline", choices=["inline", "scenario"])
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--callgrind-gradings", type=int, default=60)
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inner:  # the measured process under callgrind
        _one_run(args.db, args.gradings, toggle=True, truth=args.truth)
        return
    runs = [_one_run(args.db, args.gradings, False, args.truth) for _ in range(args.runs)]
    per = [run[0] * 1000 for run in runs]
    reads = [run[3] * 1000 for run in runs]
    cpu, statements = statistics.median(per), runs[0][1]
    sqlite = args.db == "sqlite"  # the targets are SQLite's
    figures = [
        Figure(
            f"CPU per grading, {args.db}, median of {args.runs}",
            cpu,
            "ms",
            "<= 5 ms",
            cpu <= 5 if sqlite else None,
        ),
        Figure("CPU per grading, min-max over runs", f"{min(per):.2f}-{max(per):.2f}", "ms"),
        Figure(
            "statements per grading (intake, claim, store)",
            statements,
            "",
            "<= 8",
            statements <= 8 if sqlite else None,
        ),
        Figure("transactions per grading", runs[0][2], ""),
        Figure("CPU per read of a grading, median", statistics.median(reads), "ms"),
        Figure("statements per read of a grading", runs[0][4], ""),
        # the idle workers' polls while the bench reads are counted too (a few hundredths)
        Figure("transactions per read of a grading", runs[0][5], ""),
    ]
    if args.callgrind:
        instructions = _instructions(args.db, args.callgrind_gradings, args.truth)
        figures.append(Figure("instructions per grading (callgrind)", instructions / 1e6, "M"))
    title = "CPU per grading without HTTP (application layer, scripted judge)"
    shown = {"gradings": args.gradings, "db": args.db, "truth": args.truth}
    print_report("cpu_per_grading", title, figures, shown)


if __name__ == "__main__":
    main()
