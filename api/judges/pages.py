"""Judges and their calibration runs: which judge identities are qualified, which are
provisional (never calibrated, their latest run did not qualify them, the model behind
the name changed since, or the drift canary demoted them), and the canary's history as
a table and a chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from litestar import get
from litestar.di import NamedDependency
from litestar.response import Template

from api.judges.calibration import JudgeRuns, configured_identities, judge_runs
from api.judges.canary import canary_outcome, nothing_measured
from api.judges.canary_queries import CanaryQueries
from api.service.services import Services
from api.web.pages import page
from api.web.sessions import SignedIn, web_require
from storage.quality_tables import CanaryRunRecord

__all__ = ["canary_chart", "judges_page"]

#: the canary chart's geometry (the reports' over-time chart macro draws it)
LEFT, TOP, WIDTH, HEIGHT, LEGEND_ROW = 44, 16, 640, 220, 18


def _verdict(run: CanaryRunRecord) -> dict[str, Any] | None:
    rows = [r for r in run.figures.get("rows", []) if r["level"] == "verdict"]
    return rows[0]["agreement"] if rows and rows[0]["agreement"]["n"] else None


def canary_chart(runs: Sequence[CanaryRunRecord]) -> dict[str, Any]:
    """Verdict agreement with the labels per canary run, oldest first, one line per judge,
    each point with its 95% interval; a hollow point is a run that demoted the judge."""
    ordered = sorted(runs, key=lambda r: (r.created_at, r.id))
    # one position per run, in time order (its short date is only the label: two runs in
    # one minute, or a year apart on the same day, are two points, and December comes
    # before the January after it)
    step = WIDTH / max(len(ordered) - 1, 1)
    x_of = {run.id: round(LEFT + (i * step if len(ordered) > 1 else WIDTH / 2), 1)
            for i, run in enumerate(ordered)}  # fmt: skip
    periods = [(x_of[run.id], f"{run.created_at:%m-%d %H:%M}") for run in ordered]

    def y(value: float) -> float:
        return round(TOP + (1 - value) * HEIGHT, 1)

    lines: list[dict[str, Any]] = []
    for index, judge in enumerate(dict.fromkeys(r.judge_spec for r in ordered)):
        points = []
        for run in (r for r in ordered if r.judge_spec == judge):
            figures = _verdict(run)
            if figures is None or figures["accuracy"] is None:
                continue
            interval, period = figures["accuracy_interval"], f"{run.created_at:%m-%d %H:%M}"
            points.append({
                "x": x_of[run.id], "y": y(figures["accuracy"]),
                "y_low": y(interval["low"]), "y_high": y(interval["high"]),
                "period": period, "rate": figures["accuracy"],
                "low": interval["low"], "high": interval["high"],
                "passed": figures["agreed"], "n": figures["n"],
                "provisional": 1 if run.demoted else 0,
            })  # fmt: skip
        path = " ".join(f"{p['x']},{p['y']}" for p in points)
        lines.append({"label": judge, "href": None, "index": index, "points": points,
                      "path": path})  # fmt: skip
    bottom = TOP + HEIGHT
    every = max(1, len(periods) // 8)
    return {
        "lines": [line for line in lines if line["points"]],
        "hidden": 0,
        "periods": [label for i, label in enumerate(periods) if i % every == 0],
        "ticks": [(y(t), f"{t:g}") for t in (0.0, 0.25, 0.5, 0.75, 1.0)],
        "left": LEFT,
        "right": LEFT + WIDTH,
        "bottom": bottom,
        "legend_y": bottom + 34,
        "legend_row": LEGEND_ROW,
        "width": LEFT + WIDTH + 60,
        "height": bottom + 34 + LEGEND_ROW * max(len(lines), 1),
    }


def _outcomes(runs: Sequence[CanaryRunRecord]) -> dict[str, dict[str, str]]:
    """Each run's outcome (``canary_outcome``) and what it says, by run id: the drift it
    found, or why it measured nothing."""
    shown = {}
    for run in runs:
        outcome = canary_outcome(run)
        said = "; ".join(run.reasons)
        if outcome == "unmeasured":
            said = nothing_measured(n=run.n, budget=run.budget, judge_calls=run.judge_calls)
        shown[run.id] = {"outcome": outcome, "said": said}
    return shown


def _key(judge: JudgeRuns) -> tuple[str, str, str, str]:
    return (judge.judge, judge.rubric, judge.asking_mode, judge.settings)


@get("/judges", guards=[web_require("adjudicator")], include_in_schema=False)
async def judges_page(
    services: NamedDependency[Services], who: NamedDependency[SignedIn]
) -> Template:
    """Calibration runs per judge, each judge qualified or provisional, and the canary."""
    judges = await judge_runs(services)
    identities = configured_identities(services)
    ran = {_key(j) for j in judges}
    canary = await CanaryQueries(services.store.db).runs(limit=100)
    return page(
        "judges.html",
        who,
        judges=judges,
        # the configured judge (each member of a panel) as it grades now: spec, rubric
        # version, asking and settings; those with no run as they grade now
        configured_keys=identities,
        unrun=[identity[0] for identity in identities if identity not in ran],
        canary=canary,
        canary_chart=canary_chart(canary),
        canary_outcomes=_outcomes(canary),
        canary_interval=services.settings.canary_interval,
    )
