"""The drift canary's pure parts: which items, what fell, what changed."""

from __future__ import annotations

from typing import Any

from judge.calibration import DEFAULT_GOLD, CalibrationFigures, load_gold
from judge.canary import (
    canary_items,
    changed_answers,
    check,
    fallen_rows,
    measure_noise,
    outcome,
    within_budget,
)
from tests.storage.helpers import sregym_rubric


def _row(level: str, item: str, n: int, low: float, high: float) -> dict[str, Any]:
    interval = {"low": low, "high": high, "method": "wilson"}
    figures = {"n": n, "accuracy": (low + high) / 2, "accuracy_interval": interval}
    return {"group": {}, "level": level, "item": item, "agreement": figures}


def test_a_small_canary_covers_every_variant_and_is_the_same_each_time() -> None:
    items = load_gold(DEFAULT_GOLD.read_text(), sregym_rubric())
    chosen = canary_items(items, 8)
    assert len(chosen) == 8
    assert {item.variant for _, item in chosen} == {"correct", "borderline", "wrong", "injection"}
    assert canary_items(items, 8) == chosen
    assert len({key for key, _ in canary_items(items, 500)}) == len(items)


def test_the_variants_alternate_in_the_documented_order() -> None:
    """Correct, borderline, wrong, injection: sorted by name (borderline, correct,
    injection, wrong), a canary of three items (the 1.5B profile's, asking by extraction
    within the default budget) never graded a wrong diagnosis."""
    items = load_gold(DEFAULT_GOLD.read_text(), sregym_rubric())
    chosen = [item.variant for _, item in canary_items(items, 4)]
    assert chosen == ["correct", "borderline", "wrong", "injection"]


def test_a_budget_pays_for_the_first_items_their_calls_fit() -> None:
    items = load_gold(DEFAULT_GOLD.read_text(), sregym_rubric())
    chosen = canary_items(items, 5)
    calls = {key: 9 if item.variant == "wrong" else 7 for key, item in chosen}
    paid = within_budget(chosen, 22, lambda item: 9 if item.variant == "wrong" else 7)
    assert [key for key, _ in paid] == [key for key, _ in chosen[:2]]  # 7 + 7, then 9 > 8
    assert sum(calls[key] for key, _ in paid) <= 22
    assert within_budget(chosen, 6, lambda item: 7) == []


def test_only_an_interval_wholly_below_the_qualifications_has_fallen() -> None:
    qualified = {"results": {"rows": [_row("verdict", "verdict", 73, 0.9, 1.0),
                                      _row("question", "D1-Q1", 73, 0.8, 0.95)]}}  # fmt: skip
    overlapping = {"rows": [_row("verdict", "verdict", 12, 0.6, 0.95)]}
    below = {
        "rows": [_row("verdict", "verdict", 12, 0.2, 0.7), _row("question", "D1-Q1", 12, 0.5, 0.79)]
    }
    assert fallen_rows(overlapping, qualified) == []
    assert fallen_rows(below, qualified) == ["D1-Q1", "verdict"]


def _figures() -> CalibrationFigures:
    return CalibrationFigures(
        n=3, scored=3, unscored=0, verdict_kappa=None, gold_fails=0, false_passes=0,
        false_pass_rate=None, results={"rows": []},
    )  # fmt: skip


def _answers(count: int, flipped: int) -> dict[str, dict[str, bool]]:
    """``count`` items of ten answers, the first ``flipped`` answers turned to no."""
    questions = [f"Q{q}" for q in range(10)]
    answers = {f"item-{i}": dict.fromkeys(questions, True) for i in range(count)}
    cells = [(key, q) for key in answers for q in questions][:flipped]
    for key, question in cells:
        answers[key][question] = False
    return answers


def test_changed_answers_count_only_what_both_runs_answered() -> None:
    baseline = {"a": {"D1-Q1": True, "verdict": True}, "b": {"D1-Q1": False}}
    now = {"a": {"D1-Q1": False, "verdict": True}, "b": {"D1-Q1": False}, "c": {"D1-Q1": True}}
    assert changed_answers(now, baseline) == (1, 3)


def test_the_noise_is_what_changed_between_two_gradings_of_the_same_items() -> None:
    noise = measure_noise(_answers(10, 0), _answers(10, 7))
    assert (noise.successes, noise.n, noise.rate) == (7, 100, 0.07)
    assert noise.interval.low < 0.07 < noise.interval.high


def test_changes_within_the_measured_noise_keep_the_judge_and_beyond_it_demote() -> None:
    baseline = _answers(12, 0)
    noisy = measure_noise(_answers(12, 0), _answers(12, 15))  # 15 of 120 change by chance
    steady = measure_noise(_answers(12, 0), _answers(12, 0))  # a deterministic judge
    now = _answers(12, 15)  # the canary sees as many change as the noise
    kept = check(_figures(), now, qualified=None, baseline=baseline, noise=noisy, max_changed=0)
    assert (kept.demoted, kept.changed, kept.compared) == (False, 15, 120)
    assert kept.noise == noisy
    # the same changes from a judge that measured none demote it
    moved = check(_figures(), now, qualified=None, baseline=baseline, noise=steady, max_changed=1)
    assert moved.demoted
    assert moved.reasons == [
        "15 of 120 answers (12%) differ from the baseline run's, beyond the run-to-run noise "
        "measured at qualification (0 of 120, at most 3%)"
    ]
    # three times the noisy judge's noise is beyond it; one more change than it is not
    assert check(
        _figures(), _answers(12, 45), qualified=None, baseline=baseline, noise=noisy,
        max_changed=0,
    ).demoted  # fmt: skip
    assert not check(
        _figures(), _answers(12, 16), qualified=None, baseline=baseline, noise=noisy,
        max_changed=0,
    ).demoted  # fmt: skip


def test_without_a_measured_noise_a_fixed_allowance_decides() -> None:
    baseline, now = _answers(1, 0), _answers(1, 3)  # 3 of 10 changed
    for stored in (None, {"successes": 0, "n": 0, "rate": None,
                          "interval": {"low": 0, "high": 1, "method": "wilson"}}):  # fmt: skip
        loose = check(_figures(), now, qualified=None, baseline=baseline, noise=stored,
                      max_changed=0.5)  # fmt: skip
        strict = check(_figures(), now, qualified=None, baseline=baseline, noise=stored,
                       max_changed=0.2)  # fmt: skip
        assert (loose.demoted, strict.demoted, strict.noise) == (False, True, None)
        assert "3 of 10 answers" in strict.reasons[0] and "measured no" in strict.reasons[0]
    nothing = check(_figures(), now, qualified=None, baseline=None, noise=None, max_changed=0)
    assert (nothing.changed_share, nothing.demoted) == (None, False)


def test_a_run_that_scored_nothing_is_unmeasured_whatever_else_it_says() -> None:
    """A run's outcome: ``unmeasured`` when it scored no item, else ``demoted`` when it
    demoted the judge, ``drifted`` when it found drift it could not demote for, else
    ``ok``."""
    assert outcome(scored=0, demoted=False, reasons=[]) == "unmeasured"
    assert outcome(scored=0, demoted=True, reasons=["fell"]) == "unmeasured"
    assert outcome(scored=4, demoted=True, reasons=["fell"]) == "demoted"
    assert outcome(scored=4, demoted=False, reasons=["fell"]) == "drifted"
    assert outcome(scored=4, demoted=False, reasons=[]) == "ok"
