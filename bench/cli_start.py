"""How fast the command line starts (issue 17, "A CLI that starts at once").

Four figures, each the median over ``--runs`` runs with its spread (min-max):

- ``import_ms``: ``python -X importtime -c "import api.cli.main"``, the cumulative
  import time of ``api.cli.main`` as Python reports it;
- ``help_s``: wall time of ``sre-judge --help`` (the console script), target <= 0.3 s;
- ``grade_first_request_s``: from starting ``sre-judge grade`` to the first request
  reaching a local OpenAI-compatible judge (the test judge server), target <= 0.6 s;
  ``grade_first_request_ollama_s`` the same through the Ollama API (the default judge's
  backend, which does not load the openai client).

Usage: ``python bench/cli_start.py [--runs 10]``. The machine's load is printed with the
figures: on a shared 2-core machine they move with it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import Figure, print_report  # noqa: E402
from tests.support.judge_server import running_judge_server, sregym_reply  # noqa: E402

HELP_TARGET_S = 0.3
GRADE_TARGET_S = 0.6
TRUTH = "[fault_spec] component=deployment/geo; namespace=hotel || GEO_PORT is 9999"
DIAGNOSIS = "The geo deployment in hotel listens on GEO_PORT 9999 while its Service targets 8083."
ALL_IDS = {f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)}


def _command() -> list[str]:
    script = Path(sys.executable).parent / "sre-judge"
    return [str(script)] if script.exists() else [sys.executable, "-m", "api"]


def import_ms() -> float:
    """Cumulative import time of ``api.cli.main`` in ms, as ``-X importtime`` reports it."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import api.cli.main"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    line = next(
        x for x in reversed(done.stderr.splitlines()) if x.rstrip().endswith("api.cli.main")
    )
    return int(line.split("|")[1]) / 1000


def help_s() -> float:
    """Wall seconds of ``sre-judge --help``."""
    start = time.perf_counter()
    subprocess.run([*_command(), "--help"], capture_output=True, check=True, cwd=ROOT)
    return time.perf_counter() - start


def grade_first_request_s(backend: str = "openai") -> float:
    """Seconds from starting ``sre-judge grade`` to its first request at the judge,
    asked through ``backend`` (``openai`` or ``ollama``)."""
    arrivals: list[float] = []

    def reply(_body: dict[str, Any]) -> str:
        arrivals.append(time.perf_counter())
        return sregym_reply(ALL_IDS, evidence="GEO_PORT 9999")

    with running_judge_server(default=reply) as judge:
        url = judge.openai_url if backend == "openai" else judge.ollama_url
        args = ["grade", "--judge", f"{backend}:m@{url}", "--format", "json"]
        args += ["--ground-truth", TRUTH, "--diagnosis", DIAGNOSIS]
        env = {**os.environ, "OPENAI_API_KEY": "bench"}
        start = time.perf_counter()
        subprocess.run([*_command(), *args], capture_output=True, check=True, env=env, cwd=ROOT)
    if not arrivals:
        raise RuntimeError("sre-judge grade made no judge request")
    return arrivals[0] - start


def _figure(name: str, values: list[float], unit: str, target: float | None) -> list[Figure]:
    median = statistics.median(values)
    met = None if target is None else median <= target
    shown = "" if target is None else f"<= {target} {unit}"
    return [
        Figure(name, round(median, 3), unit, shown, met),
        Figure(f"{name}_min", round(min(values), 3), unit),
        Figure(f"{name}_max", round(max(values), 3), unit),
    ]


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per figure (default 10)")
    runs = parser.parse_args().runs
    imports = [import_ms() for _ in range(runs)]
    helps = [help_s() for _ in range(runs)]
    grades = [grade_first_request_s() for _ in range(runs)]
    ollama_grades = [grade_first_request_s("ollama") for _ in range(runs)]
    figures = [
        *_figure("import_ms", imports, "ms", None),
        *_figure("help_s", helps, "s", HELP_TARGET_S),
        *_figure("grade_first_request_s", grades, "s", GRADE_TARGET_S),
        *_figure("grade_first_request_ollama_s", ollama_grades, "s", GRADE_TARGET_S),
    ]
    print_report("cli_start", f"CLI start, median of {runs} runs (min, max)", figures)


if __name__ == "__main__":
    main()
