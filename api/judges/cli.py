"""``sre-judge calibrate``: grade a labelled gold set, store the agreement, qualify the judge;
``sre-judge judges canary``: run the drift canary now, or show its runs.

The use case is ``api.judges.calibration.calibrate``; this command reads the gold file
(by default the calibration set that ships with the package, ``judge/data/calibration/``),
prints the agreement table (or JSON) and the comparison with the previous run, and with
``--fail-on-drift`` exits 1 when verdict kappa dropped by more than the threshold.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import load_settings, run, service_runtime
from api.cli.options import FiniteFloatRange, checked_judge, checked_rubric, format_option

if TYPE_CHECKING:
    from api.judges.calibration import Calibration
    from judge.calibration import CalibrationFigures

__all__ = [
    "EXIT_DEMOTED",
    "EXIT_DRIFT",
    "EXIT_UNMEASURED",
    "calibrate_command",
    "canary_command",
    "judges_group",
]

EXIT_DRIFT = 1
#: ``judges canary``: the run demoted the judge
EXIT_DEMOTED = 1
#: ``judges canary``: a run scored no item (as ``grade`` exits for an unscored grading)
EXIT_UNMEASURED = 3


def _summary(figures: CalibrationFigures, run: Any, previous: Any, threshold: float) -> list[str]:
    from api.judges.calibration import drifted

    def number(value: float | None) -> str:
        return "undefined" if value is None else f"{value:.3f}"

    lines = [
        f"judge {run.judge_spec}, rubric {run.rubric_id}@{run.rubric_version}, "
        f"asking {run.asking_mode}, gold {run.gold_name} (sha256 {run.gold_sha256[:12]})",
        f"n {figures.n} ({figures.unscored} unscored); verdict kappa "
        f"{number(figures.verdict_kappa)}; false passes {figures.false_passes} of "
        f"{figures.gold_fails} gold fails ({number(figures.false_pass_rate)})",
        f"qualified: {'yes' if run.qualified else 'no'}",
    ]
    noise = run.results.get("noise")
    if noise and noise["n"]:
        interval = noise["interval"]
        lines.append(
            f"run-to-run noise: {noise['successes']} of {noise['n']} answers changed when "
            f"the canary's items were graded again (95% interval {interval['low']:.3f}-"
            f"{interval['high']:.3f})"
        )
    if previous is not None:
        lines.append(
            f"previous run {previous.created_at:%Y-%m-%d %H:%M} UTC: verdict kappa "
            f"{number(previous.verdict_kappa)}, now {number(run.verdict_kappa)}"
            + (" - DRIFT" if drifted(previous, run, threshold) else "")
        )
    return lines


@click.command("calibrate")
@click.option(
    "--gold",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    help="the labelled gold set, JSONL ('-' for stdin); default: the calibration set that "
    "ships with sre-judge",
)
@click.option("--judge", "judge_spec", help="BACKEND:MODEL[@BASE_URL]; default SRE_JUDGE_JUDGE")
@click.option("--rubric", "rubric_id", help="rubric id; default SRE_JUDGE_RUBRIC")
@click.option("--fail-on-drift", is_flag=True, help="exit 1 when verdict kappa dropped")
@click.option(
    "--drift-threshold", type=FiniteFloatRange(0, 2), default=0.1, show_default=True,
    help="a drop of verdict kappa larger than this is drift",
)  # fmt: skip
@format_option("table", "json")
def calibrate_command(
    gold: Path | None,
    judge_spec: str | None,
    rubric_id: str | None,
    fail_on_drift: bool,
    drift_threshold: float,
    fmt: str,
) -> None:
    """Grade a labelled gold set (JSONL), store and print the agreement, qualify the judge.

    \b
    Example:
      sre-judge calibrate --gold gold.jsonl --judge openai:judge-b --fail-on-drift
    """
    from api.judges.calibration import calibrate, drifted
    from judge.calibration import DEFAULT_GOLD, GoldError, load_gold
    from judge.rubric import load_rubric_dir

    settings = load_settings()
    judge_spec = checked_judge(settings.judge if judge_spec is None else judge_spec)
    rubric_id = checked_rubric(
        settings.rubric if rubric_id is None else rubric_id, settings.rubric_dir
    )
    gold = gold or DEFAULT_GOLD
    is_stdin = str(gold) == "-"
    raw = sys.stdin.buffer.read() if is_stdin else gold.read_bytes()
    gold_name = "stdin" if is_stdin else gold.name
    try:  # a gold set that cannot be read changes nothing: refused before the database opens
        rubric = load_rubric_dir(settings.rubric_dir)[rubric_id]
        load_gold(raw.decode("utf-8"), rubric, max_text_bytes=settings.max_text_bytes)
    except (GoldError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{gold_name}: {exc}", param_hint="--gold") from None

    async def work() -> Calibration:
        async with service_runtime() as services:
            return await calibrate(
                services,
                raw,
                gold_name=gold_name,
                judge=judge_spec,
                rubric=rubric_id,
            )

    outcome = run(work())
    _print(outcome, drift_threshold, fmt)
    if fail_on_drift and drifted(outcome.previous, outcome.run, drift_threshold):
        sys.exit(EXIT_DRIFT)


def _print(outcome: Calibration, threshold: float, fmt: str) -> None:
    from api.judges.calibration import drifted

    figures, run, previous = outcome.figures, outcome.run, outcome.previous
    if fmt == "json":
        out = {
            "id": run.id, "judge": run.judge_spec, "rubric_version": run.rubric_version,
            "asking_mode": run.asking_mode, "gold_sha256": run.gold_sha256,
            "qualified": run.qualified, **figures.model_dump(mode="json"),
            "noise": run.results.get("noise"),
            "previous": None if previous is None else {
                "id": previous.id, "verdict_kappa": previous.verdict_kappa,
            },
            "drift": drifted(previous, run, threshold),
        }  # fmt: skip
        click.echo(json.dumps(out, indent=2))
        return
    from api.cli.output import print_tables
    from api.tabular import Tabular

    rows = []
    for row in figures.results["rows"]:
        f, ci = row["agreement"], row["agreement"]["kappa_interval"] or {}
        rows.append([
            row["level"], row["item"], f["n"], f["accuracy"], f["kappa"],
            ci.get("low"), ci.get("high"), *f["confusion"].values(),
        ])  # fmt: skip
    columns = ["level", "item", "n", "accuracy", "kappa", "kappa_ci_low", "kappa_ci_high"]
    columns += ["yes->yes", "yes->no", "no->yes", "no->no"]
    notes = ["confusion: judge -> gold label"]
    print_tables([Tabular("Judge vs gold labels", columns, rows, notes)])  # the terminal's width
    for line in _summary(figures, run, previous, threshold):
        click.echo(line)


@click.group("judges")
def judges_group() -> None:
    """Judges: the drift canary.

    \b
    Example:
      sre-judge judges canary
    """


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _noise(noise: dict[str, Any] | None) -> str:
    """The run-to-run noise a canary run was held against, as a suffix."""
    if not noise:
        return " (no noise measured)"
    return f" (noise at qualification {noise['successes']} of {noise['n']})"


@judges_group.command("canary")
@click.option(
    "--judge",
    "judge_spec",
    help="BACKEND:MODEL[@BASE_URL]; default the judges the service grades with: each member "
    "of SRE_JUDGE_PANEL when set, else SRE_JUDGE_JUDGE",
)
@click.option("--history", is_flag=True, help="show the stored runs instead of running one")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@format_option("table", "json")
def canary_command(judge_spec: str | None, history: bool, limit: int, fmt: str) -> None:
    """Regrade the drift canary set now (within SRE_JUDGE_CANARY_BUDGET judge calls,
    bypassing the cache) with each judge the service grades with (a run each member of a
    panel) and say whether it drifted; exit 1 when a run demoted its judge, else 3 when a
    run scored no item (it measured nothing: the judge could not be asked, or the budget
    pays for no item).

    \b
    Example:
      sre-judge judges canary
      sre-judge judges canary --history --format json
    """
    from api.judges.canary import (
        canary_answer,
        canary_history,
        canary_public,
        nothing_measured,
        run_canaries,
    )

    if judge_spec is not None:
        checked_judge(judge_spec)

    async def work() -> tuple[list[dict[str, Any]], Any]:
        """The runs to print as lines, and the JSON to print instead."""
        # the history reads what is stored: never an empty database made for it
        async with service_runtime(existing=history) as services:
            if history:
                stored = await canary_history(services, judge=judge_spec, limit=limit)
                return stored, stored
            made = await run_canaries(services, judge=judge_spec, actor="cli")
            shown = canary_answer(services.settings, made, judge=judge_spec)
            return [canary_public(r) for r in made], shown

    runs, shown = run(work())
    if fmt == "json":
        click.echo(json.dumps(shown, indent=2))
    else:
        for item in runs:
            state = item["outcome"]
            if state == "unmeasured":
                state = "UNMEASURED: " + nothing_measured(
                    n=item["n"], budget=item["budget"], judge_calls=item["judge_calls"]
                )
            elif state != "ok":
                state = f"{state.upper()}: " + "; ".join(item["reasons"])
            click.echo(
                f"{item['created_at'][:16]} {item['judge']} n {item['n']} "
                f"(scored {item['scored']}), {item['judge_calls']} of {item['budget']} calls, "
                f"verdict accuracy {_number(item['verdict_accuracy'])}, answers changed "
                f"{_number(item['changed_share'])}{_noise(item['noise'])}: {state}"
            )
    if not history and any(item["demoted"] for item in runs):
        sys.exit(EXIT_DEMOTED)
    if not history and any(item["outcome"] == "unmeasured" for item in runs):
        sys.exit(EXIT_UNMEASURED)
