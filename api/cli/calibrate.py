"""``sre-judge calibrate``: grade a labelled gold set, store the agreement, qualify the judge.

The judge is graded with the service's sampling settings, like ``sre-judge grade``, at
most ``SRE_JUDGE_JUDGE_CONCURRENCY`` diagnoses at a time. The run is stored
(``calibration_run``) with the judge's identity (spec without base URL, settings, rubric
version, asking mode), so gradings by that judge stop being provisional once it
qualifies. A repeated run of the same gold file and judge reports the change of verdict
kappa since the previous one (drift, e.g. a silently updated model tag).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.options import run_with_store
from api.service.settings import Settings

if TYPE_CHECKING:
    from judge.calibration import CalibrationFigures, GoldItem
    from judge.grader import Grader
    from judge.rubric import Rubric
    from judge.verdict import GradingResult
    from storage import Store

__all__ = ["EXIT_DRIFT", "calibrate_command"]

EXIT_DRIFT = 1


def _grader(settings: Settings, spec_text: str) -> Grader:
    from api.service.grader_factory import grader_for
    from judge.backends import build_backend
    from judge.spec import parse_judge_spec

    backend = build_backend(parse_judge_spec(spec_text), timeout=settings.judge_timeout)
    return grader_for(settings, backend)


async def grade_gold(
    grader: Grader, rubric: Rubric, items: list[GoldItem], *, concurrency: int
) -> list[GradingResult]:
    """Grade every gold item, at most ``concurrency`` at a time, in order."""
    limit = asyncio.Semaphore(max(1, concurrency))

    async def one(item: GoldItem) -> GradingResult:
        async with limit:
            return await grader.grade(rubric, item.ground_truth, item.diagnosis)

    try:
        return list(await asyncio.gather(*(one(i) for i in items)))
    finally:
        await grader.backend.aclose()


def _summary(figures: CalibrationFigures, run: Any, previous: Any, threshold: float) -> list[str]:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [
        f"judge {run.judge_spec}, rubric {run.rubric_id}@{run.rubric_version}, "
        f"asking {run.asking_mode}, gold {run.gold_name} (sha256 {run.gold_sha256[:12]})",
        f"n {figures.n} ({figures.unscored} unscored); verdict kappa "
        f"{number(figures.verdict_kappa)}; false passes {figures.false_passes} of "
        f"{figures.gold_fails} gold fails ({number(figures.false_pass_rate)})",
        f"qualified: {'yes' if run.qualified else 'no'}",
    ]
    if previous is not None:
        lines.append(
            f"previous run {previous.created_at:%Y-%m-%d %H:%M} UTC: verdict kappa "
            f"{number(previous.verdict_kappa)}, now {number(run.verdict_kappa)}"
            + (" - DRIFT" if _drifted(previous, run, threshold) else "")
        )
    return lines


def _drifted(previous: Any, run: Any, threshold: float) -> bool:
    if previous is None or previous.verdict_kappa is None:
        return False
    now = -1.0 if run.verdict_kappa is None else run.verdict_kappa
    return bool(previous.verdict_kappa - now > threshold)


@click.command("calibrate")
@click.option("--gold", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True)
@click.option("--judge", "judge_spec", help="BACKEND:MODEL[@BASE_URL]; default SRE_JUDGE_JUDGE")
@click.option("--rubric", "rubric_id", help="rubric id; default SRE_JUDGE_RUBRIC")
@click.option("--fail-on-drift", is_flag=True, help="exit 1 when verdict kappa dropped")
@click.option(
    "--drift-threshold", type=float, default=0.1, show_default=True,
    help="a drop of verdict kappa larger than this is drift",
)  # fmt: skip
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def calibrate_command(
    gold: Path,
    judge_spec: str | None,
    rubric_id: str | None,
    fail_on_drift: bool,
    drift_threshold: float,
    fmt: str,
) -> None:
    """Grade a labelled gold set (JSONL), store and print the agreement, qualify the judge."""
    from api.service.qualification import judge_identity, judge_settings
    from judge.calibration import GoldError, calibration_figures, load_gold, qualifies
    from judge.errors import JudgeSpecError, RubricError
    from judge.rubric import load_rubric_dir
    from storage.quality_tables import CalibrationRunRecord

    settings = Settings()
    spec_text = judge_spec or settings.judge
    try:
        rubric = load_rubric_dir(settings.rubric_dir)[rubric_id or settings.rubric]
        raw = gold.read_bytes()
        items = load_gold(raw.decode("utf-8"), rubric)
        grader = _grader(settings, spec_text)
    except KeyError:
        raise click.UsageError(f"unknown rubric {rubric_id or settings.rubric!r}") from None
    except (GoldError, JudgeSpecError, RubricError, UnicodeDecodeError) as exc:
        raise click.UsageError(
            f"{gold}: {exc}" if isinstance(exc, GoldError) else str(exc)
        ) from None

    async def work(store: Store) -> tuple[CalibrationFigures, Any, Any]:
        results = await grade_gold(grader, rubric, items, concurrency=settings.judge_concurrency)
        figures = calibration_figures(rubric, items, results)
        identity: dict[str, Any] = {
            "judge_spec": judge_identity(spec_text),
            "judge_settings": judge_settings(settings),
            "rubric_version": rubric.version,
            "asking_mode": settings.judge_asking or rubric.asking,
        }
        sha = hashlib.sha256(raw).hexdigest()
        earlier = await store.calibration_runs(**identity, gold_sha256=sha)
        run = CalibrationRunRecord(
            **identity, rubric_id=rubric.id, gold_name=gold.name, gold_sha256=sha,
            n=figures.n, verdict_kappa=figures.verdict_kappa,
            false_pass_rate=figures.false_pass_rate, results=figures.model_dump(mode="json"),
            qualified=qualifies(
                figures, min_kappa=settings.qualify_min_kappa,
                max_false_pass=settings.qualify_max_false_pass,
            ),
        )  # fmt: skip
        run = await store.add_calibration_run(run)
        return figures, run, earlier[0] if earlier else None

    figures, run, previous = run_with_store(work)
    drifted = _drifted(previous, run, drift_threshold)
    _print(figures, run, previous, drift_threshold, fmt)
    if fail_on_drift and drifted:
        sys.exit(EXIT_DRIFT)


def _print(
    figures: CalibrationFigures, run: Any, previous: Any, threshold: float, fmt: str
) -> None:
    if fmt == "json":
        out = {
            "id": run.id, "judge": run.judge_spec, "rubric_version": run.rubric_version,
            "asking_mode": run.asking_mode, "gold_sha256": run.gold_sha256,
            "qualified": run.qualified, **figures.model_dump(mode="json"),
            "previous": None if previous is None else {
                "id": previous.id, "verdict_kappa": previous.verdict_kappa,
            },
            "drift": _drifted(previous, run, threshold),
        }  # fmt: skip
        click.echo(json.dumps(out, indent=2))
        return
    from rich.console import Console

    from api.service.reports.tables import Tabular, print_table

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
    print_table(Tabular("Judge vs gold labels", columns, rows, notes), Console(width=160))
    for line in _summary(figures, run, previous, threshold):
        click.echo(line)
