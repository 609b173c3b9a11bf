"""What a report covers, said in words: its filter, its verdicts, its judge, its gradings.

Every report, table and chart states these, so that two figures are never compared
without seeing that they count different things: effective verdicts (after human
overrides) or the judge's own, current gradings only or shadow regrades too, how
many gradings came from a judge that had not yet qualified (provisional), and how many
graded a diagnosis against its submitter's own ground truth (inline, counted apart
unless asked for).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from api.reports.filters import ReportFilter, Verdicts

__all__ = [
    "VERDICTS_MEANING",
    "filter_text",
    "filters_echo",
    "gradings_text",
    "inline_text",
    "judge_text",
    "provisional_text",
    "scope_lines",
]

VERDICTS_MEANING: dict[str, str] = {
    "effective": "effective verdicts (after human overrides)",
    "judge": "the judges' own verdicts (before human overrides)",
}


def filters_echo(filters: ReportFilter) -> dict[str, Any]:
    """The filters that are set, as JSON-ready values."""
    hidden = ("current_only", "superseded")
    echo = {k: v for k, v in asdict(filters).items() if v is not None and k not in hidden}
    # how inline gradings count is said in a scope line of its own, not as a filter
    echo.pop("inline", None)
    if not filters.current_only:
        echo["current_only"] = False
    if filters.superseded:
        echo["include_superseded"] = True
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in echo.items()}


def filter_text(filters: ReportFilter) -> str:
    """``agent=x, judge=y`` or ``no filter``."""
    echo = filters_echo(filters)
    return ", ".join(f"{k}={v}" for k, v in echo.items()) or "no filter"


def judge_text(filters: ReportFilter, group_by: list[str] | tuple[str, ...] = ()) -> str:
    """Which judge's gradings are counted."""
    if filters.judge is not None:
        return f"judge {filters.judge}"
    return "every judge, one row each" if "judge" in group_by else "every judge, pooled"


def gradings_text(filters: ReportFilter) -> str:
    """Current gradings only, with shadow regrades, or every grading."""
    if not filters.current_only:
        return "every grading, superseded and shadow ones included"
    if filters.superseded:
        shadow = " and shadow-regrade gradings" if filters.include == "shadow" else ""
        return f"current gradings, those a promoted regrade replaced{shadow}"
    if filters.include == "shadow":
        return "current gradings and shadow-regrade gradings (newest per submission and judge)"
    return "current gradings only (shadow-regrade gradings need include=shadow)"


def provisional_text(filters: ReportFilter, provisional: int, total: int) -> str:
    """How many gradings are provisional, and how to leave them out or split them."""
    if filters.provisional == "exclude":
        return "provisional gradings (judge not yet qualified) left out"
    if filters.provisional == "only":
        return f"provisional gradings only (judge not yet qualified): {provisional}"
    if not provisional:
        return "no provisional gradings (every judge had qualified)"
    return (
        f"PROVISIONAL: {provisional} of {total} gradings by a judge not yet qualified "
        "(provisional=exclude leaves them out, group by provisional splits them)"
    )


def inline_text(filters: ReportFilter, inline: int) -> str | None:
    """How gradings against their submitters' own ground truths were counted."""
    if filters.inline == "include":
        return "inline ground truths (self-graded) mixed in with registered scenarios"
    if filters.inline != "apart":
        return None
    if not inline:
        return "no gradings against inline ground truths (self-graded) in the filter"
    return (
        f"INLINE: {inline} gradings against inline ground truths (self-graded) counted "
        "apart, not in n (inline=include mixes them in)"
    )


def scope_lines(
    filters: ReportFilter,
    verdicts: Verdicts | None,
    *,
    provisional: int,
    total: int,
    group_by: list[str] | tuple[str, ...] = (),
    inline: int = 0,
) -> list[str]:
    """The statements every report carries: filter, verdicts, judge, gradings,
    provisional, and inline gradings."""
    lines = [f"filter: {filter_text(filters)}"]
    if verdicts is not None:
        lines.append(f"verdicts: {VERDICTS_MEANING[verdicts]}")
    lines += [
        f"judge: {judge_text(filters, group_by)}",
        f"gradings: {gradings_text(filters)}",
        provisional_text(filters, provisional, total),
    ]
    inline_line = inline_text(filters, inline)
    if inline_line is not None:
        lines.append(inline_line)
    return lines
