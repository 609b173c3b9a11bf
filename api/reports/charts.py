"""Charts of rates with their 95% intervals, written to PNG or SVG with matplotlib.

matplotlib is an optional extra (``pip install 'sre-judge[charts]'``); it is imported
only when a chart is asked for. No pyplot: a bare ``Figure`` keeps no global state.
Every chart carries its scope under the title (filter, verdicts, judge, gradings,
provisional). Labels, titles and scope lines hold submitters' text (agents', models' and
scenarios' names): each is drawn on one line, with what SVG (XML) may not hold, a
control character or U+FFFE/U+FFFF, shown as its escape (``\\x1b``), so one name never
makes a chart unreadable. A rate that counts verdicts made while its judge was
provisional (not yet qualified) is drawn apart, orange and hatched, says so beside its
bar, and the legend names both kinds of bar.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ParamSpec

from api.terminal import terminal_text

if TYPE_CHECKING:
    from api.reports.models import ComparisonReport, GroupRate, QuestionRate

_Params = ParamSpec("_Params")

__all__ = [
    "CHART_SUFFIXES",
    "Bar",
    "ChartUnavailable",
    "Difference",
    "comparison_chart",
    "question_bars",
    "rate_bars",
    "write_difference_chart",
    "write_interval_chart",
]

CHART_SUFFIXES = (".png", ".svg")
#: bars of rates from qualified judges' verdicts only, and of rates counting provisional ones
QUALIFIED_STYLE = {"color": "#4C72B0", "hatch": ""}
PROVISIONAL_STYLE = {"color": "#DD8452", "hatch": "//"}
QUALIFIED_LABEL = "verdicts of qualified judges"
PROVISIONAL_LABEL = "includes verdicts made while the judge was provisional (not yet qualified)"


#: what XML allows nowhere and :func:`api.terminal.terminal_text` leaves as it is
_NOT_XML = re.compile("[\ufffe\uffff]")


def _label(text: str) -> str:
    """``text`` as a chart draws it: one line, each character an SVG file may not hold
    (even in the comment matplotlib writes beside the glyphs) shown as its escape."""
    return _NOT_XML.sub(
        lambda one: f"\\u{ord(one.group()):04x}", terminal_text(text, one_line=True)
    )


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
    #: gradings behind the rate made by a judge not yet qualified
    provisional: int = 0


@dataclass(frozen=True)
class Difference:
    """One difference of rates (a - b) with its interval and p-value."""

    label: str
    estimate: float | None
    low: float | None
    high: float | None
    p_value: float | None
    #: the test behind ``p_value``: mcnemar-exact (paired), fisher-exact, paired-t ...
    test: str | None = None


def _literal_text(draw: Callable[_Params, None]) -> Callable[_Params, None]:
    """``draw`` with every text drawn as written: labels are agents', models' and
    scenarios' names (submitters' text), and matplotlib reads ``$...$`` as a formula
    (a name such as ``$\\foo$`` stopped the chart)."""

    @functools.wraps(draw)
    def drawn(*args: _Params.args, **kwargs: _Params.kwargs) -> None:
        try:
            import matplotlib
        except ImportError:  # _figure says charts need matplotlib
            return draw(*args, **kwargs)
        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return drawn


def _figure(rows: int, path: Path, scope: Sequence[str] = ()) -> Any:
    if path.suffix.lower() not in CHART_SUFFIXES:
        raise ValueError(f"a chart is written as .png or .svg, not {path.suffix or 'no suffix'}")
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ChartUnavailable("charts need matplotlib: pip install 'sre-judge[charts]'") from exc
    height = 1.6 + 0.45 * max(rows, 1) + 0.2 * len(scope)  # room for the scope lines
    return Figure(figsize=(9, height), layout="constrained")


def _finish(figure: Any, axes: Any, path: Path, title: str, scope: Sequence[str]) -> None:
    """The title with the scope lines under it, then the file."""
    axes.set_title("\n".join(_label(line) for line in [title, *scope]), loc="left", fontsize=9)
    figure.savefig(path, format=path.suffix.lower().lstrip("."), bbox_inches="tight")


def _right_note(axes: Any, y: float, text: str) -> None:
    axes.annotate(
        text,
        xy=(1.0, y),
        xycoords=("axes fraction", "data"),
        xytext=(6, 0),
        textcoords="offset points",
        va="center",
    )


@_literal_text
def write_interval_chart(
    bars: Sequence[Bar], path: Path, *, title: str, xlabel: str, scope: Sequence[str] = ()
) -> None:
    """Horizontal bars of the rates, the intervals as error bars, ``k/n`` to the right."""
    figure = _figure(len(bars), path, scope)
    axes = figure.add_subplot()
    positions = list(range(len(bars)))[::-1]
    rates = [bar.rate or 0.0 for bar in bars]
    errors = [
        [max(0.0, rate - bar.low) for rate, bar in zip(rates, bars, strict=True)],
        [max(0.0, bar.high - rate) for rate, bar in zip(rates, bars, strict=True)],
    ]
    styles = [PROVISIONAL_STYLE if bar.provisional else QUALIFIED_STYLE for bar in bars]
    axes.barh(
        positions,
        rates,
        xerr=errors,
        color=[style["color"] for style in styles],
        hatch=[style["hatch"] for style in styles],
        ecolor="#333333",
        capsize=4,
    )
    if any(bar.provisional for bar in bars):
        _provisional_legend(figure)
    for y, bar in zip(positions, bars, strict=True):
        marked = f" ({bar.provisional} provisional)" if bar.provisional else ""
        _right_note(axes, y, f"{bar.successes}/{bar.n}{marked}")
    axes.set_yticks(positions, [_label(bar.label) for bar in bars])
    axes.set_xlim(0.0, 1.0)
    axes.set_xlabel(_label(xlabel))
    axes.grid(axis="x", alpha=0.3)
    _finish(figure, axes, path, title, scope)


def _provisional_legend(figure: Any) -> None:
    """A legend naming both kinds of bar, under the axes (it never hides a bar)."""
    from matplotlib.patches import Patch

    kinds = ((QUALIFIED_STYLE, QUALIFIED_LABEL), (PROVISIONAL_STYLE, PROVISIONAL_LABEL))
    handles = [
        Patch(facecolor=style["color"], hatch=style["hatch"], label=label) for style, label in kinds
    ]
    figure.legend(handles=handles, loc="outside lower left", fontsize=8, frameon=False)


@_literal_text
def write_difference_chart(
    differences: Sequence[Difference], path: Path, *, title: str, scope: Sequence[str] = ()
) -> None:
    """Each difference as a point with its 95% interval around zero, and its p-value."""
    figure = _figure(len(differences), path, scope)
    axes = figure.add_subplot()
    positions = list(range(len(differences)))[::-1]
    axes.axvline(0.0, color="#999999", linewidth=1)
    for y, d in zip(positions, differences, strict=True):
        if d.estimate is None:
            _right_note(axes, y, "undefined")
            continue
        low = d.estimate if d.low is None else d.low
        high = d.estimate if d.high is None else d.high
        xerr = [[d.estimate - low], [high - d.estimate]]
        axes.errorbar([d.estimate], [y], xerr=xerr, fmt="o", color="#4C72B0", capsize=5)
        test = f" ({d.test})" if d.test else ""
        p = "p n/a" if d.p_value is None else f"p = {d.p_value:.3g}{test}"
        interval = "" if d.low is None else f" [{d.low:+.3f}, {d.high:+.3f}]"
        _right_note(axes, y, f"{d.estimate:+.3f}{interval}, {p}")
    axes.set_yticks(positions, [_label(d.label) for d in differences])
    axes.set_ylim(-0.8, len(differences) - 0.2)
    axes.set_xlim(-1.0, 1.0)
    axes.set_xlabel("difference in pass rate, a - b (error bar: 95% interval)")
    axes.grid(axis="x", alpha=0.3)
    _finish(figure, axes, path, title, scope)


def comparison_chart(report: ComparisonReport) -> tuple[list[Difference], list[str]]:
    """The differences of a comparison (attempts, and scenarios if computed) and its scope."""
    found = []
    for label, d in (("a - b", report.difference), ("a - b, by scenario", report.by_scenario)):
        if d is not None:
            low, high = (d.interval.low, d.interval.high) if d.interval else (None, None)
            found.append(Difference(label, d.estimate, low, high, d.p_value, d.test))
    scope = [report.definitions]
    scope += [
        f"{name}: {line}" for name, arm in (("a", report.a), ("b", report.b)) for line in arm.scope
    ]
    return found, scope


def rate_bars(rates: Sequence[GroupRate]) -> list[Bar]:
    """One bar per group's pass rate, labelled by its key, provisional gradings counted."""
    return [
        Bar(
            " / ".join(str(v) if v is not None else "-" for v in r.key.values()) or "all",
            r.passed, r.n, r.pass_rate, r.interval.low, r.interval.high,
            provisional=r.provisional,
        )
        for r in rates
    ]  # fmt: skip


def question_bars(questions: Sequence[QuestionRate]) -> list[Bar]:
    """One bar per question's yes rate, labelled by its group and question id."""
    return [
        Bar(
            " / ".join([*(str(v) for v in q.key.values()), q.question_id]),
            q.yes, q.n, q.yes_rate, q.interval.low, q.interval.high,
        )
        for q in questions
    ]  # fmt: skip
