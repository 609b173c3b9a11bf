"""Timing for tests that compare two runs of the same work (a ratio, never a wall-clock
bound: the machine's speed and load cancel out)."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["best_seconds"]


def best_seconds(work: Callable[[], object], *, runs: int = 2) -> float:
    """The fastest of ``runs`` runs of ``work``, in seconds: the least disturbed by other
    work on a shared machine."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best
