"""Charts of rates with their 95% intervals, written to PNG or SVG with matplotlib.

matplotlib is an optional extra (``pip install 'sre-judge[charts]'``); it is imported
only when a chart is asked for. No pyplot: a bare ``Figure`` keeps no global state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CHART_SUFFIXES", "Bar", "ChartUnavailable", "write_interval_chart"]

CHART_SUFFIXES = (".png", ".svg")


class ChartUnavailable(RuntimeError):
    """matplotlib is not installed."""


@dataclass(frozen=True)
class Bar:
    """One rate: ``successes`` of ``n`` with its interval; ``rate`` None when n is 0."""

    label: str
    successes: int
    n: int
    rate: float | None
    low: float
    high: float


def write_interval_chart(bars: Sequence[Bar], path: Path, *, title: str, xlabel: str) -> None:
    """Horizontal bars of the rates, the intervals as error bars, ``k/n`` to the right."""
    if path.suffix.lower() not in CHART_SUFFIXES:
        raise ValueError(f"a chart is written as .png or .svg, not {path.suffix or 'no suffix'}")
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ChartUnavailable("charts need matplotlib: pip install 'sre-judge[charts]'") from exc
    height = 1.2 + 0.45 * max(len(bars), 1)
    figure = Figure(figsize=(8, height), layout="constrained")
    axes = figure.add_subplot()
    positions = list(range(len(bars)))[::-1]
    rates = [bar.rate or 0.0 for bar in bars]
    errors = [
        [max(0.0, rate - bar.low) for rate, bar in zip(rates, bars, strict=True)],
        [max(0.0, bar.high - rate) for rate, bar in zip(rates, bars, strict=True)],
    ]
    axes.barh(positions, rates, xerr=errors, color="#4C72B0", ecolor="#333333", capsize=4)
    for y, bar in zip(positions, bars, strict=True):
        axes.annotate(
            f"{bar.successes}/{bar.n}",
            xy=(1.0, y),
            xycoords=("axes fraction", "data"),
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
        )
    axes.set_yticks(positions, [bar.label for bar in bars])
    axes.set_xlim(0.0, 1.0)
    axes.set_xlabel(xlabel)
    axes.set_title(title)
    axes.grid(axis="x", alpha=0.3)
    figure.savefig(path, format=path.suffix.lower().lstrip("."), bbox_inches="tight")
