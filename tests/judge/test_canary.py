"""The drift canary's pure parts: which items, what fell, what changed."""

from __future__ import annotations

from typing import Any

from judge.calibration import DEFAULT_GOLD, CalibrationFigures, load_gold
from judge.canary import canary_items, changed_answers, check, fallen_rows
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


def test_only_an_interval_wholly_below_the_qualifications_has_fallen() -> None:
    qualified = {"results": {"rows": [_row("verdict", "verdict", 73, 0.9, 1.0),
                                      _row("question", "D1-Q1", 73, 0.8, 0.95)]}}  # fmt: skip
    overlapping = {"rows": [_row("verdict", "verdict", 12, 0.6, 0.95)]}
    below = {
        "rows": [_row("verdict", "verdict", 12, 0.2, 0.7), _row("question", "D1-Q1", 12, 0.5, 0.79)]
    }
    assert fallen_rows(overlapping, qualified) == []
    assert fallen_rows(below, qualified) == ["D1-Q1", "verdict"]


def test_changed_answers_beyond_the_noise_demote() -> None:
    baseline = {"a": {"D1-Q1": True, "verdict": True}, "b": {"D1-Q1": False}}
    now = {"a": {"D1-Q1": False, "verdict": True}, "b": {"D1-Q1": False}, "c": {"D1-Q1": True}}
    assert changed_answers(now, baseline) == (1, 3)
    figures = CalibrationFigures(
        n=3, scored=3, unscored=0, verdict_kappa=None, gold_fails=0, false_passes=0,
        false_pass_rate=None, results={"rows": []},
    )  # fmt: skip
    loose = check(figures, now, qualified=None, baseline=baseline, max_changed=0.5)
    strict = check(figures, now, qualified=None, baseline=baseline, max_changed=0.2)
    assert (loose.demoted, strict.demoted) == (False, True)
    assert "1 of 3 answers" in strict.reasons[0]
    assert check(figures, now, qualified=None, baseline=None, max_changed=0).changed_share is None
