"""The flip report of a regrade job: what changed between the old and the new grading.

- pass->fail and fail->pass: counts and lists, on the effective verdicts users see;
- per-question change matrices of the judges' own answers (yes->no, no->yes, ...);
- agreement of the old and the new judge: Cohen's kappa on answers and on verdicts,
  with n and a 95 % confidence interval (statsmodels);
- disagreement of the new judge with the human overrides in force on the old grading.

Only items where both gradings are graded are compared; the others are counted.
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from typing import Any

from judge.agreement import cohens_kappa
from storage.regrade.flips import FlipItem

__all__ = ["CSV_COLUMNS", "flip_report", "flips_csv", "kappa_figures"]

CSV_COLUMNS = (
    "submission_id", "agent", "model", "scenario_id", "previous_grading_id", "grading_id",
    "previous_status", "status", "previous_passed", "passed", "flip", "previous_yes_count",
    "yes_count", "changed_questions", "human_override", "disagrees_with_human",
)  # fmt: skip


def kappa_figures(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Cohen's kappa of two raters' yes/no labels, with n and a 95 % interval.

    ``kappa`` is None when it is undefined (both raters always gave the same label).
    """
    fit = cohens_kappa(pairs)
    low, high = fit.bounds() or (None, None)
    return {
        "n": fit.n,
        "kappa": _number(fit.kappa),
        "ci_low": _number(low),
        "ci_high": _number(high),
    }


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 4)


def _flip(item: FlipItem) -> str:
    if item.old.status != "graded" or item.new.status != "graded":
        return "not_compared"
    if item.old.passed and item.new.passed is False:
        return "pass->fail"
    if item.old.passed is False and item.new.passed:
        return "fail->pass"
    return "same"


def _changed(item: FlipItem) -> list[str]:
    old, new = item.old.judge_answers, item.new.judge_answers
    return [
        f"{qid}:{'yes' if old[qid] else 'no'}->{'yes' if new[qid] else 'no'}"
        for qid in sorted(set(old) & set(new))
        if old[qid] != new[qid]
    ]


def _human_disagreements(item: FlipItem) -> list[str]:
    found = [
        qid
        for qid, human in sorted(item.human_answers.items())
        if qid in item.new.judge_answers and item.new.judge_answers[qid] != human
    ]
    if item.human_verdict is not None and item.new.judge_passed not in (None, item.human_verdict):
        found.append("verdict")
    return found


def _listed(item: FlipItem) -> dict[str, Any]:
    return {
        "submission_id": item.submission_id,
        "agent": item.agent,
        "scenario_id": item.scenario_id,
        "previous_grading_id": item.old.id,
        "grading_id": item.new.id,
        "previous_yes_count": item.old.yes_count,
        "yes_count": item.new.yes_count,
        "changed_questions": _changed(item),
    }


def _matrices(compared: list[FlipItem]) -> dict[str, dict[str, int]]:
    matrices: dict[str, Counter[str]] = {}
    for item in compared:
        old, new = item.old.judge_answers, item.new.judge_answers
        for qid in sorted(set(old) & set(new)):
            key = f"{'yes' if old[qid] else 'no'}->{'yes' if new[qid] else 'no'}"
            matrices.setdefault(qid, Counter())[key] += 1
    keys = ("yes->yes", "yes->no", "no->yes", "no->no")
    return {qid: {k: counts[k] for k in keys} for qid, counts in matrices.items()}


def _human(items: list[FlipItem]) -> dict[str, Any]:
    reviewed = [i for i in items if i.human_answers or i.human_verdict is not None]
    answers = [
        (human, i.new.judge_answers[qid])
        for i in reviewed
        for qid, human in i.human_answers.items()
        if qid in i.new.judge_answers
    ]
    verdicts = [
        (i.human_verdict, i.new.judge_passed)
        for i in reviewed
        if i.human_verdict is not None and i.new.judge_passed is not None
    ]
    disagreeing = [i for i in reviewed if _human_disagreements(i)]
    return {
        "gradings_with_overrides": len(reviewed),
        "answer_overrides": len(answers),
        "answers_disagreeing": sum(1 for h, j in answers if h != j),
        "verdict_overrides": len(verdicts),
        "verdicts_disagreeing": sum(1 for h, j in verdicts if h != j),
        "items": [{**_listed(i), "disagrees_on": _human_disagreements(i)} for i in disagreeing],
    }


def flip_report(job: dict[str, Any], items: list[FlipItem]) -> dict[str, Any]:
    """The whole report as JSON-ready data."""
    compared = [i for i in items if _flip(i) != "not_compared"]
    flips = {
        kind: [_listed(i) for i in items if _flip(i) == kind]
        for kind in ("pass->fail", "fail->pass")
    }
    answer_pairs = [
        (i.old.judge_answers[q], i.new.judge_answers[q])
        for i in compared
        for q in sorted(set(i.old.judge_answers) & set(i.new.judge_answers))
    ]
    verdict_pairs = [
        (i.old.judge_passed, i.new.judge_passed)
        for i in compared
        if i.old.judge_passed is not None and i.new.judge_passed is not None
    ]
    statuses = Counter((i.old.status, i.new.status) for i in items if _flip(i) == "not_compared")
    return {
        "job": job,
        "items": len(items),
        "compared": len(compared),
        "not_compared": {f"{old}->{new}": n for (old, new), n in sorted(statuses.items())},
        "pass_to_fail": {"count": len(flips["pass->fail"]), "items": flips["pass->fail"]},
        "fail_to_pass": {"count": len(flips["fail->pass"]), "items": flips["fail->pass"]},
        "questions": _matrices(compared),
        "agreement": {
            "answers": kappa_figures(answer_pairs),
            "verdicts": kappa_figures(verdict_pairs),
        },
        "human_overrides": _human(items),
    }


def flips_csv(items: list[FlipItem]) -> str:
    """One row per item, old beside new."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for i in items:
        human = bool(i.human_answers) or i.human_verdict is not None
        writer.writerow([
            i.submission_id, i.agent or "", i.model or "", i.scenario_id or "", i.old.id,
            i.new.id, i.old.status, i.new.status, i.old.passed, i.new.passed, _flip(i),
            i.old.yes_count, i.new.yes_count, ";".join(_changed(i)), human,
            ";".join(_human_disagreements(i)),
        ])  # fmt: skip
    return out.getvalue()
