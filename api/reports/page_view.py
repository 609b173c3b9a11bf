"""What the report pages draw: rows of rates with their 95% intervals, the links to the
gradings behind each row, and the sentence that says what a chart shows.

The figures come from the report services the ``/v1/stats`` routes use; this module only
lays them out (the SVG itself is a template macro, so every label is escaped)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from pydantic import ValidationError

from api.reports.filters import ReportFilter
from api.reports.models import GroupRate
from api.reports.params import ArmQuery
from api.service.errors import InvalidRequest

__all__ = [
    "FILTER_FIELDS",
    "VERDICTS_TEXT",
    "ChartRow",
    "carried_filters",
    "describe_filter",
    "gradings_link",
    "label_of",
    "page_filter",
    "time_chart",
]

#: the filter fields a report page takes: the API's, every one (a page counts the
#: gradings the API counts for the same query)
FILTER_FIELDS = (
    "agent", "model", "scenario_id", "run_id", "rubric", "judge", "created_after",
    "created_before", "ground_truth_source", "scenario_set", "include", "provisional", "inline",
)  # fmt: skip
#: the fields the gradings list filters on too (the others leave a figure unlinked)
_LIST_FIELDS = frozenset({"agent", "model", "scenario_id", "rubric", "judge"})
#: what each choice of verdicts means, as the charts say it
VERDICTS_TEXT = {
    "effective": "effective verdicts (after human overrides)",
    "judge": "the judge's own verdicts (before human overrides)",
}
#: a report group's key -> the gradings list's query parameter
_GROUP_PARAM = {
    "agent": "agent",
    "model": "model",
    "scenario": "scenario_id",
    "rubric": "rubric",
    "judge": "judge",
}


@dataclass(frozen=True, slots=True)
class ChartRow:
    """One bar: ``successes`` of ``n``, its interval, its link. The rate is None when n
    is 0, or when it is undefined for n > 0 (a kappa where one side gave a single
    answer); the chart then says ``undefined · n N`` with the same n as the table, and
    the row's title gives ``undefined``, the reason."""

    label: str
    successes: int
    n: int
    rate: float | None
    low: float
    high: float
    href: str | None = None
    #: why the rate is undefined (e.g. "one category only: rater b always said yes")
    undefined: str | None = None


def page_filter(params: Mapping[str, str | None], prefix: str = "") -> ReportFilter:
    """The report filter of a page's form; blank fields mean "any", a bad one is a 422
    naming it."""
    values = {
        name: value.strip()
        for name in FILTER_FIELDS
        if (value := params.get(prefix + name)) and value.strip()
    }
    try:
        return ArmQuery.model_validate(values).to_filter()
    except ValidationError as exc:
        error = exc.errors()[0]
        field = prefix + ".".join(str(p) for p in error["loc"])
        raise InvalidRequest(f"{field}: {error['msg']}", field=field) from None


def carried_filters(params: Mapping[str, str | None]) -> str:
    """The query (``?agent=a&model=m``, or ``""``) that keeps a page's filters when the
    reader moves to another report page: every report page takes the same filters."""
    kept = {name: value for name in FILTER_FIELDS if (value := params.get(name))}
    return "?" + urlencode(kept) if kept else ""


def _set(filters: ReportFilter) -> dict[str, str]:
    # ``inline`` says how a report counts, not which gradings a list shows
    return {
        k: str(v)
        for k, v in asdict(filters).items()
        if v is not None and k in FILTER_FIELDS and k != "inline"
    }


def describe_filter(filters: ReportFilter, *, everything: str = "all current gradings") -> str:
    """``agent=a, model=m``, or, with no filter, ``everything``: what the report counts
    then (every current grading, unless the report counts others too)."""
    chosen = _set(filters)
    if not chosen:
        return everything
    return ", ".join(f"{k}={v}" for k, v in chosen.items())


def gradings_link(filters: ReportFilter, key: Mapping[str, str | None] | None = None) -> str | None:
    """The gradings list behind a figure: the filter, narrowed to the group ``key``.

    None when the list cannot show exactly those gradings (a group without a value or
    with a blank one, which the list reads as "any"; a filter the list does not take: a
    run id, dates, a ground-truth source, a set, shadow gradings, provisional ones)."""
    params = _set(filters)
    if not params.keys() <= _LIST_FIELDS:
        return None
    for name, value in (key or {}).items():
        if value is None or not value.strip() or name not in _GROUP_PARAM:
            return None
        params[_GROUP_PARAM[name]] = value
    return "/gradings" + (f"?{urlencode(params)}" if params else "")


def _value_label(value: str | None) -> str:
    if value is None:
        return "(none)"
    return value if value.strip() else "(empty)"


def label_of(key: Mapping[str, str | None]) -> str:
    """A group's label: its values joined, ``(none)`` for a missing one and ``(empty)``
    for a blank one (never ``all``, the overall row's label)."""
    return " · ".join(_value_label(v) for v in key.values()) or "all"


#: the SVG's geometry: label column, plot width, figures column, row height
LABEL_W, PLOT_W, FIGURES_W, ROW_H, TOP = 220, 380, 130, 26, 22


def _x(value: float, lo: float, hi: float) -> float:
    return round(LABEL_W + (min(max(value, lo), hi) - lo) / (hi - lo) * PLOT_W, 1)


def chart(rows: Sequence[ChartRow], *, lo: float = 0.0, hi: float = 1.0) -> dict[str, Any]:
    """Pixel positions of each row's bar, interval and figures, for the ``interval_chart``
    macro; the axis from ``lo`` to ``hi`` (0..1 for rates, -1..1 for kappa)."""
    zero = _x(0.0, lo, hi)
    drawn = []
    for i, row in enumerate(rows):
        y = TOP + i * ROW_H + ROW_H / 2
        x_rate = _x(row.rate, lo, hi) if row.rate is not None else None
        drawn.append(
            {
                "row": row,
                "y": y,
                "bar_x": min(zero, x_rate) if x_rate is not None else zero,
                "bar_w": abs(x_rate - zero) if x_rate is not None else 0,
                "x_rate": x_rate,
                "x_low": _x(row.low, lo, hi),
                "x_high": _x(row.high, lo, hi),
            }
        )
    ticks = [lo + (hi - lo) * k / 4 for k in range(5)]
    return {
        "rows": drawn,
        "ticks": [(_x(t, lo, hi), f"{t:g}") for t in ticks],
        "width": LABEL_W + PLOT_W + FIGURES_W,
        "height": TOP + ROW_H * max(len(rows), 1) + 6,
        "label_w": LABEL_W,
        "figures_x": LABEL_W + PLOT_W + 8,
        "zero": zero,
    }


#: the over-time chart's geometry: plot origin and size, legend row height
TIME_LEFT, TIME_TOP, TIME_W, TIME_H, LEGEND_ROW = 44, 16, 640, 220, 18
#: pixels between the series' points of one period, so their intervals do not overlap
TIME_DODGE = 7
#: the most series one over-time chart draws (the largest by n); the table lists them all
TIME_SERIES = 8


def time_chart(
    groups: Sequence[GroupRate], series: str, period: str, filters: ReportFilter
) -> dict[str, Any]:
    """Geometry of a pass rate over time: one line per ``series`` value (agent or model)
    through its ``period`` buckets (day or week), each point with its 95% interval.

    ``groups`` are the groups of a report grouped by ``[series, period]``. Buckets with
    n = 0 (all unscored or pending) draw no point and break no line: the line joins the
    points that have a rate. At most ``TIME_SERIES`` series are drawn, the largest by n;
    ``hidden`` names how many were left out, so the caption can say so. Each series'
    legend links to its gradings under ``filters``."""
    periods = sorted({g.key.get(period) or "" for g in groups} - {""})
    by_series: dict[str | None, list[GroupRate]] = {}
    for g in groups:
        if g.key.get(period):
            by_series.setdefault(g.key.get(series), []).append(g)
    ranked = sorted(by_series, key=lambda v: (-sum(g.n for g in by_series[v]), v or ""))
    shown = ranked[:TIME_SERIES]
    step = TIME_W / max(len(periods) - 1, 1)
    x_of = {p: round(TIME_LEFT + (i * step if len(periods) > 1 else TIME_W / 2), 1)
            for i, p in enumerate(periods)}  # fmt: skip

    def y(value: float) -> float:
        return round(TIME_TOP + (1 - value) * TIME_H, 1)

    lines = []
    for index, value in enumerate(shown):
        dodge = (index - (len(shown) - 1) / 2) * TIME_DODGE  # intervals side by side
        points = [
            {
                "x": round(x_of[g.key[period] or ""] + dodge, 1),
                "y": y(g.pass_rate),
                "y_low": y(g.interval.low),
                "y_high": y(g.interval.high),
                "period": g.key[period],
                "rate": g.pass_rate,
                "low": g.interval.low,
                "high": g.interval.high,
                "passed": g.passed,
                "n": g.n,
                "provisional": g.provisional,
            }
            for g in sorted(by_series[value], key=lambda g: g.key[period] or "")
            if g.pass_rate is not None
        ]
        path = " ".join(f"{p['x']},{p['y']}" for p in points)
        key = {series: value}
        lines.append({"label": label_of(key), "href": gradings_link(filters, key),
                      "index": index, "points": points, "path": path})  # fmt: skip
    bottom = TIME_TOP + TIME_H
    every = max(1, len(periods) // 8)  # at most about eight period labels under the axis
    return {
        "lines": lines,
        "hidden": len(ranked) - len(shown),
        "periods": [(x_of[p], p) for i, p in enumerate(periods) if i % every == 0],
        "ticks": [(y(t), f"{t:g}") for t in (0.0, 0.25, 0.5, 0.75, 1.0)],
        "left": TIME_LEFT,
        "right": TIME_LEFT + TIME_W,
        "bottom": bottom,
        "legend_y": bottom + 34,
        "legend_row": LEGEND_ROW,
        "width": TIME_LEFT + TIME_W + 60,
        "height": bottom + 34 + LEGEND_ROW * max(len(lines), 1),
    }
