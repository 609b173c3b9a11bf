"""Reading a scenario load: YAML parsing, the whole check, and how long the event loop waits.

    python bench/yaml_loads.py [--scenarios 3000] [--runs 5]

A load of ``--scenarios`` generated scenarios (about 750 bytes of ground truth each, 2.2
MB of YAML at the default) is read as the service reads ``POST /v1/scenarios:load`` and
``sre-judge scenarios load``:

- YAML parsing alone, through libyaml's safe loader (``judge.yaml_text.load_yaml``,
  what the service uses) and through PyYAML's pure Python safe loader (what it used
  before), each the median of ``--runs`` runs of CPU time (``time.process_time``) with
  min-max;
- the whole check (``parse_scenarios``: parsing, every item validated, every text
  checked) of the YAML and of the same load as JSON Lines;
- the longest wait of the event loop while a load is checked, with the check on the
  loop (as before) and in a worker thread (as the use case runs it now): a ticker task
  notes the largest gap between its 1 ms sleeps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as `python bench/yaml_loads.py`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import yaml

from bench.common import Figure, print_report

_WORDS = (
    "pod", "restarts", "CrashLoopBackOff", "USER_PORT=9999", "OOMKilled", "limit", "128Mi",
    "service", "targets", "8086", "readiness", "probe", "fails", "namespace", "deployment",
)  # fmt: skip


def scenarios(count: int) -> list[dict[str, Any]]:
    """``count`` scenarios as a dataset holds them, with varied ground truths."""
    rng = random.Random(0)
    return [
        {
            "id": f"app-{n % 40}/fault-{n}",
            "ground_truth": (
                f"[fault_spec] component=deployment/svc-{n}; namespace=ns-{n % 7} || "
                + " ".join(rng.choice(_WORDS) for _ in range(90))
            ),
        }
        for n in range(count)
    ]


def _cpu(fn: Callable[[], Any], runs: int) -> list[float]:
    spent = []
    for _ in range(runs):
        started = time.process_time()
        fn()
        spent.append(time.process_time() - started)
    return spent


def _median(values: list[float]) -> tuple[float, str]:
    ms = [v * 1000 for v in values]
    return statistics.median(ms), f"{min(ms):.0f}-{max(ms):.0f}"


async def _longest_wait(check: Callable[[], Any], in_thread: bool) -> float:
    """The largest gap (s) between a ticker's 1 ms sleeps while ``check`` runs."""
    longest = 0.0
    running = True

    async def tick() -> None:
        nonlocal longest
        last = time.perf_counter()
        while running:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.01)
    longest = 0.0
    if in_thread:
        await asyncio.to_thread(check)
    else:
        check()
    await asyncio.sleep(0.01)
    running = False
    await ticker
    return longest


def main() -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from api.scenarios.loading import parse_scenarios
    from judge.yaml_text import load_yaml

    items = scenarios(args.scenarios)
    as_yaml = yaml.safe_dump({"scenarios": items}, allow_unicode=True)
    as_jsonl = "\n".join(json.dumps(item) for item in items)
    limit = 64 * 1024

    def check_yaml() -> Any:
        return parse_scenarios(as_yaml, fmt="yaml", max_bytes=limit)

    libyaml, libyaml_spread = _median(_cpu(lambda: load_yaml(as_yaml), args.runs))
    pure, pure_spread = _median(_cpu(lambda: yaml.safe_load(as_yaml), args.runs))
    whole, whole_spread = _median(_cpu(check_yaml, args.runs))
    jsonl, jsonl_spread = _median(
        _cpu(lambda: parse_scenarios(as_jsonl, fmt="jsonl", max_bytes=limit), args.runs)
    )
    on_loop = asyncio.run(_longest_wait(check_yaml, in_thread=False)) * 1000
    off_loop = asyncio.run(_longest_wait(check_yaml, in_thread=True)) * 1000
    figures = [
        Figure("YAML of the load", len(as_yaml.encode()) / 1e6, "MB"),
        Figure(f"YAML parse, libyaml (median of {args.runs})", libyaml, "ms"),
        Figure("YAML parse, libyaml, min-max", libyaml_spread, "ms"),
        Figure("YAML parse, pure Python", pure, "ms"),
        Figure("YAML parse, pure Python, min-max", pure_spread, "ms"),
        Figure("whole check of the YAML load", whole, "ms"),
        Figure("whole check of the YAML load, min-max", whole_spread, "ms"),
        Figure("whole check of the same load as JSON Lines", jsonl, "ms"),
        Figure("whole check as JSON Lines, min-max", jsonl_spread, "ms"),
        Figure("longest event-loop wait, check on the loop", on_loop, "ms"),
        Figure("longest event-loop wait, check in a thread", off_loop, "ms"),
    ]
    title = f"Reading a scenario load of {args.scenarios} scenarios"
    print_report("yaml_loads", title, figures, {"scenarios": args.scenarios})


if __name__ == "__main__":
    main()
