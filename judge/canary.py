"""The drift canary: a labelled set regraded now and then, and whether the judge drifted.

A judge qualified by a calibration run can drift afterwards without its name or digest
changing (a server setting, a quantisation, a template). The canary regrades a small
labelled set (by default a stratified part of the shipped calibration set: each fault
family and each variant in turn, :func:`canary_items`) and compares:

- **agreement with the labels** per question and on the verdict, with the qualifying
  calibration run's: a figure whose 95% Wilson interval on the canary lies wholly below
  the calibration run's interval for it has fallen (:func:`fallen_rows`);
- **the judge's answers** with the calibration run's on the same items (or the first
  canary run's after it): the share that differ, with its 95% Wilson interval, against
  the run-to-run noise the calibration measured by grading the canary's part of its set
  a second time (:func:`measure_noise`). When the changed share's interval lies wholly
  above the noise's, the judge's answers changed beyond noise. A calibration run that
  measured no noise leaves a fixed allowance (``max_changed``) in its place.

Either demotes the judge (:func:`check`). A run that scored no item (its judge could not
be asked, or its budget paid for no item) measured nothing: its outcome says so
(:func:`outcome`), never that the judge is fine. No web and no database here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from judge.agreement import VERDICT
from judge.calibration import CalibrationFigures, GoldItem, Variant
from judge.statistics import Proportion, proportion
from judge.verdict import GradingResult

__all__ = [
    "CanaryCheck",
    "CanaryOutcome",
    "answers_of",
    "canary_items",
    "changed_answers",
    "check",
    "fallen_rows",
    "item_key",
    "measure_noise",
    "outcome",
    "within_budget",
]

#: the agreement levels compared with the calibration run's
_COMPARED = ("question", "verdict")
#: the order variants alternate in, as the type names them (a small canary grades a
#: correct, a borderline and a wrong diagnosis before an injected one)
_VARIANTS: tuple[str, ...] = get_args(Variant)

#: what a canary run concluded: ``unmeasured`` (it scored no item: the judge could not be
#: asked, or the budget paid for no item), ``demoted`` (it demoted the judge), ``drifted``
#: (it found drift in a judge not qualified now: nothing to demote), ``ok`` (no drift)
CanaryOutcome = Literal["ok", "drifted", "demoted", "unmeasured"]


def item_key(item: GoldItem, index: int) -> str:
    """A canary item's key: its id, else its line number in the set."""
    return item.id or f"#{index + 1}"


def canary_items(items: Sequence[GoldItem], limit: int) -> list[tuple[str, GoldItem]]:
    """At most ``limit`` items, keyed, taken in turn from each (variant, family) stratum
    with the variants alternating, so that a small canary still covers every kind of
    case; the same items every time."""
    strata: dict[tuple[str, str], list[tuple[str, GoldItem]]] = {}
    for index, item in enumerate(items):
        stratum = (item.variant or "", item.family or "")
        strata.setdefault(stratum, []).append((item_key(item, index), item))
    rank: dict[tuple[str, str], int] = {}
    for variant, family in sorted(strata):
        rank[(variant, family)] = sum(1 for v, _ in rank if v == variant)

    def turn(stratum: tuple[str, str]) -> tuple[int, int, str, str]:
        variant, family = stratum
        place = _VARIANTS.index(variant) if variant in _VARIANTS else len(_VARIANTS)
        return rank[stratum], place, variant, family

    order = sorted(strata, key=turn)
    chosen: list[tuple[str, GoldItem]] = []
    for depth in range(max((len(m) for m in strata.values()), default=0)):
        chosen.extend(strata[s][depth] for s in order if depth < len(strata[s]))
    return chosen[: max(0, limit)]


def within_budget(
    chosen: Sequence[tuple[str, GoldItem]], budget: int, calls_of: Callable[[GoldItem], int]
) -> list[tuple[str, GoldItem]]:
    """The first items of ``chosen`` whose calls (``calls_of``: what grading the item
    takes when every reply is usable) the ``budget`` pays for, in order."""
    paid: list[tuple[str, GoldItem]] = []
    for key, item in chosen:
        budget -= calls_of(item)
        if budget < 0:
            break
        paid.append((key, item))
    return paid


def answers_of(keys: Sequence[str], results: Sequence[GradingResult]) -> dict[str, dict[str, bool]]:
    """The judge's own answers (and verdict) per graded item key."""
    found: dict[str, dict[str, bool]] = {}
    for key, result in zip(keys, results, strict=True):
        if result.status != "graded":
            continue
        answers = {a.question_id: a.judge_answer for a in result.answers}
        if result.judge_outcome is not None:
            answers[VERDICT] = result.judge_outcome.passed
        found[key] = answers
    return found


def _rows(figures: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    """Agreement rows of stored figures (``CalibrationFigures.results``) by level and item."""
    rows = figures.get("rows") or figures.get("results", {}).get("rows") or []
    return {(r["level"], r["item"]): r for r in rows if not r.get("group")}


def fallen_rows(canary: Mapping[str, Any], qualified: Mapping[str, Any]) -> list[str]:
    """Items (questions, ``verdict``) whose canary accuracy interval lies wholly below the
    calibration run's."""
    theirs = _rows(qualified)
    fallen = []
    for (level, item), row in sorted(_rows(canary).items()):
        base = theirs.get((level, item))
        if level not in _COMPARED or base is None:
            continue
        now, then = row["agreement"], base["agreement"]
        if not now["n"] or not then["n"]:
            continue
        if now["accuracy_interval"]["high"] < then["accuracy_interval"]["low"]:
            fallen.append(item)
    return fallen


def changed_answers(
    now: Mapping[str, Mapping[str, bool]], baseline: Mapping[str, Mapping[str, Any]]
) -> tuple[int, int]:
    """(answers that differ, answers compared) between two runs' answers of the same items."""
    changed = compared = 0
    for key, answers in now.items():
        before = baseline.get(key)
        if before is None:
            continue
        for question, answer in answers.items():
            if question in before:
                compared += 1
                changed += bool(before[question]) != answer
    return changed, compared


def measure_noise(
    first: Mapping[str, Mapping[str, bool]], second: Mapping[str, Mapping[str, bool]]
) -> Proportion:
    """Run-to-run noise: the share of the judge's answers that differ between two gradings
    of the same items, with its Wilson interval (n is 0 when nothing was compared)."""
    changed, compared = changed_answers(second, first)
    return proportion(changed, compared)


def _noise(stored: Mapping[str, Any] | Proportion | None) -> Proportion | None:
    """A measured noise (stored as JSON by a calibration run), None when none was measured."""
    if stored is None:
        return None
    noise = stored if isinstance(stored, Proportion) else Proportion.model_validate(stored)
    return noise if noise.n else None


class CanaryCheck(BaseModel):
    """What one canary run found."""

    model_config = ConfigDict(frozen=True)

    #: items whose agreement fell below the qualification's
    fallen: list[str]
    changed: int
    compared: int
    #: changed / compared; None with nothing to compare
    changed_share: float | None
    #: the run-to-run noise it was held against (None: the fixed allowance was)
    noise: Proportion | None
    demoted: bool
    #: why, in words
    reasons: list[str]


def _beyond_noise(changed: int, compared: int, noise: Proportion) -> bool:
    """Whether ``changed`` of ``compared`` lies wholly above the measured noise."""
    return proportion(changed, compared).interval.low > noise.interval.high


def check(
    figures: CalibrationFigures,
    answers: Mapping[str, Mapping[str, bool]],
    *,
    qualified: Mapping[str, Any] | None,
    baseline: Mapping[str, Mapping[str, Any]] | None,
    noise: Mapping[str, Any] | Proportion | None,
    max_changed: float,
) -> CanaryCheck:
    """Compare a canary run with the qualifying calibration run's figures (``qualified``,
    its stored results) and the baseline run's answers, the changed share against the
    measured run-to-run ``noise`` (else against ``max_changed``); demote on either drift."""
    fallen = fallen_rows(figures.results, qualified) if qualified is not None else []
    changed, compared = changed_answers(answers, baseline) if baseline is not None else (0, 0)
    share = changed / compared if compared else None
    measured = _noise(noise)
    reasons = []
    if fallen:
        reasons.append(
            "agreement with the labels fell below the qualification's interval on "
            + ", ".join(fallen)
        )
    if share is not None and measured is not None and _beyond_noise(changed, compared, measured):
        reasons.append(
            f"{changed} of {compared} answers ({share:.0%}) differ from the baseline run's, "
            f"beyond the run-to-run noise measured at qualification ({measured.successes} of "
            f"{measured.n}, at most {measured.interval.high:.0%})"
        )
    elif share is not None and measured is None and share > max_changed:
        reasons.append(
            f"{changed} of {compared} answers ({share:.0%}) differ from the baseline run's "
            f"(at most {max_changed:.0%} allowed: the qualification measured no run-to-run "
            "noise)"
        )
    return CanaryCheck(
        fallen=fallen,
        changed=changed,
        compared=compared,
        changed_share=share,
        noise=measured,
        demoted=bool(reasons),
        reasons=reasons,
    )


def outcome(*, scored: int, demoted: bool, reasons: Sequence[str]) -> CanaryOutcome:
    """A canary run's outcome from the items it ``scored``, whether it ``demoted`` the
    judge and the drift it found (``reasons``): a run that scored nothing is
    ``unmeasured``, whatever else it says."""
    if scored == 0:
        return "unmeasured"
    if demoted:
        return "demoted"
    return "drifted" if reasons else "ok"
