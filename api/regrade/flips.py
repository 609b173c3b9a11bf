"""The flip report of a regrade job: what changed between the old and the new grading.

One definition throughout, stated in the report: ``verdicts="effective"`` (default)
compares the verdicts and answers users see (after the evidence check and the human
overrides in force), ``"judge"`` the judges' own (``judge_passed``, ``judge_answer``),
as ``sre-judge report agreement`` does for judge against judge.

- pass->fail and fail->pass: counts and lists;
- per-question change matrices of the answers (yes->no, no->yes, ...);
- agreement of the old and the new grading: Cohen's kappa on answers and on verdicts,
  with n and a 95 % confidence interval, or undefined with the reason;
- the pass rate before and after, and their difference (new - old): both gradings are
  of the same submissions, so the test is paired: McNemar's exact test on the flips and
  Newcombe's paired 95 % interval (method 10), never a test for independent rates;
- disagreement of the new judge's own answers with the human overrides in force on
  the old grading.

Only items where both gradings have a verdict in force are compared (an unscored grading
a human decided has the human's); those with a held pass on either side are listed apart
(``held``), the others counted by their statuses (``not_compared``).
"""

from __future__ import annotations

import csv
import io
import math
from collections import Counter
from typing import Any, Literal

from api.regrade.flip_reads import FlipItem, GradingSide
from api.tabular import Tabular, inert_cells
from judge.agreement import cohens_kappa
from judge.statistics import PairedCounts, compare_paired, proportion

__all__ = [
    "CSV_COLUMNS",
    "DEFINITIONS",
    "FlipVerdicts",
    "flip_report",
    "flip_tables",
    "flips_csv",
    "kappa_figures",
    "pass_rate_change",
]

FlipVerdicts = Literal["effective", "judge"]
#: what the flips, the matrices and the agreement block count, per ``verdicts``
DEFINITIONS: dict[str, str] = {
    "effective": (
        "effective verdicts and answers (after the evidence check and the human overrides "
        "in force on each grading), old grading -> new grading"
    ),
    "judge": (
        "the judges' own verdicts and answers (judge_passed, judge_answer; before evidence "
        "checks and human overrides), old grading -> new grading, as in "
        "`report agreement --kind judge_judge`"
    ),
}

CSV_COLUMNS = (
    "submission_id", "agent", "model", "scenario_id", "previous_grading_id", "grading_id",
    "previous_status", "status", "previous_passed", "passed", "flip", "previous_yes_count",
    "yes_count", "changed_questions", "human_override", "disagrees_with_human",
)  # fmt: skip


def kappa_figures(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Cohen's kappa of two raters' yes/no labels, with n and a 95 % interval.

    ``kappa`` is None when it is undefined, and ``undefined`` says why (no pairs, or
    one category only); it is never given as 0 with an interval of 0 to 0.
    """
    fit = cohens_kappa(pairs)
    low, high = fit.shown_bounds() or (None, None)
    return {
        "n": fit.n,
        "kappa": _number(fit.kappa),
        "ci_low": _number(low),
        "ci_high": _number(high),
        "undefined": fit.undefined,
    }


def _number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else round(value, 4)


def _verdict(side: GradingSide, verdicts: FlipVerdicts) -> bool | None:
    return side.passed if verdicts == "effective" else side.judge_passed


def _answers(side: GradingSide, verdicts: FlipVerdicts) -> dict[str, bool]:
    return side.answers if verdicts == "effective" else side.judge_answers


def _flip(item: FlipItem, verdicts: FlipVerdicts = "effective") -> str:
    """pass->fail, fail->pass, same when both have a verdict (an unscored grading a
    human decided has one: pass rates count it); ``held`` when each side without a
    verdict is a pass held for a human; ``not_compared`` otherwise (pending, cancelled,
    unscored with no human verdict, or graded without a verdict by an earlier import)."""
    old, new = _verdict(item.old, verdicts), _verdict(item.new, verdicts)
    if old is None or new is None:
        sides = ((item.old, old), (item.new, new))
        held = all(verdict is not None or side.held for side, verdict in sides)
        return "held" if held else "not_compared"
    if old and new is False:
        return "pass->fail"
    if old is False and new:
        return "fail->pass"
    return "same"


def _changed(item: FlipItem, verdicts: FlipVerdicts = "effective") -> list[str]:
    old, new = _answers(item.old, verdicts), _answers(item.new, verdicts)
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


def _listed(item: FlipItem, verdicts: FlipVerdicts = "effective") -> dict[str, Any]:
    return {
        "submission_id": item.submission_id,
        "agent": item.agent,
        "scenario_id": item.scenario_id,
        "previous_grading_id": item.old.id,
        "grading_id": item.new.id,
        "previous_yes_count": item.old.yes_count,
        "yes_count": item.new.yes_count,
        "changed_questions": _changed(item, verdicts),
    }


def _matrices(compared: list[FlipItem], verdicts: FlipVerdicts) -> dict[str, dict[str, int]]:
    matrices: dict[str, Counter[str]] = {}
    for item in compared:
        old, new = _answers(item.old, verdicts), _answers(item.new, verdicts)
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


def pass_rate_change(verdict_pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """The pass rate of the old and of the new gradings of the same submissions, and the
    paired difference new - old: McNemar's exact p on the flips, Newcombe's paired 95 %
    interval (method 10; :func:`judge.statistics.compare_paired`)."""
    pairs = PairedCounts(
        both=sum(1 for old, new in verdict_pairs if old and new),
        only_a=sum(1 for old, new in verdict_pairs if new and not old),
        only_b=sum(1 for old, new in verdict_pairs if old and not new),
        neither=sum(1 for old, new in verdict_pairs if not old and not new),
    )
    n = pairs.n
    note = (
        f"paired: the same {n} submissions graded old and new; "
        f"{pairs.only_a} fail->pass, {pairs.only_b} pass->fail"
    )
    return {
        "old": proportion(pairs.both + pairs.only_b, n).model_dump(mode="json"),
        "new": proportion(pairs.both + pairs.only_a, n).model_dump(mode="json"),
        "new_minus_old": compare_paired(pairs, note=note).model_dump(mode="json"),
    }


def flip_report(
    job: dict[str, Any], items: list[FlipItem], *, verdicts: FlipVerdicts = "effective"
) -> dict[str, Any]:
    """The whole report as JSON-ready data, every count on the one definition ``verdicts``."""
    compared = [i for i in items if _flip(i, verdicts) not in ("not_compared", "held")]
    flips = {
        kind: [_listed(i, verdicts) for i in items if _flip(i, verdicts) == kind]
        for kind in ("pass->fail", "fail->pass")
    }
    held = [
        {**_listed(i, verdicts), "previous_passed": _verdict(i.old, verdicts),
         "passed": _verdict(i.new, verdicts)}
        for i in items
        if _flip(i, verdicts) == "held"
    ]  # fmt: skip
    answer_pairs = [
        (old[q], new[q])
        for i in compared
        for old, new in [(_answers(i.old, verdicts), _answers(i.new, verdicts))]
        for q in sorted(set(old) & set(new))
    ]
    verdict_pairs = [
        (old, new)
        for i in compared
        for old, new in [(_verdict(i.old, verdicts), _verdict(i.new, verdicts))]
        if old is not None and new is not None
    ]
    statuses = Counter(
        (i.old.status, i.new.status) for i in items if _flip(i, verdicts) == "not_compared"
    )
    return {
        "job": job,
        "verdicts": verdicts,
        "definitions": DEFINITIONS[verdicts],
        "items": len(items),
        "compared": len(compared),
        "not_compared": {f"{old}->{new}": n for (old, new), n in sorted(statuses.items())},
        "pass_to_fail": {"count": len(flips["pass->fail"]), "items": flips["pass->fail"]},
        "fail_to_pass": {"count": len(flips["fail->pass"]), "items": flips["fail->pass"]},
        # graded on both sides, one verdict held for a human: neither a flip nor the same
        "held": {"count": len(held), "items": held},
        "questions": _matrices(compared, verdicts),
        "agreement": {
            "answers": kappa_figures(answer_pairs),
            "verdicts": kappa_figures(verdict_pairs),
        },
        "pass_rates": pass_rate_change(verdict_pairs),
        "human_overrides": _human(items),
    }


def flips_csv(items: list[FlipItem], *, verdicts: FlipVerdicts = "effective") -> str:
    """One row per item, old beside new; verdicts, flip and changes per ``verdicts``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for i in items:
        human = bool(i.human_answers) or i.human_verdict is not None
        writer.writerow(inert_cells([
            i.submission_id, i.agent or "", i.model or "", i.scenario_id or "", i.old.id,
            i.new.id, i.old.status, i.new.status, _verdict(i.old, verdicts),
            _verdict(i.new, verdicts), _flip(i, verdicts), i.old.yes_count, i.new.yes_count,
            ";".join(_changed(i, verdicts)), human,
            ";".join(_human_disagreements(i)),
        ]))  # fmt: skip
    return out.getvalue()


def _rate_row(label: str, rate: dict[str, Any]) -> list[Any]:
    interval = rate["interval"]
    return [label, rate["n"], rate["successes"], rate["rate"], interval["low"], interval["high"]]


def _pass_rate_table(report: dict[str, Any], title: str) -> Tabular:
    """Old and new pass rates of the compared submissions, and new - old, paired."""
    rates = report["pass_rates"]
    change = rates["new_minus_old"]
    interval = change["interval"] or {}
    rows = [
        [*_rate_row("old", rates["old"]), None, None],
        [*_rate_row("new", rates["new"]), None, None],
        [
            "new - old", report["compared"], None, change["estimate"],
            interval.get("low"), interval.get("high"), change["p_value"], change["test"],
        ],
    ]  # fmt: skip
    statuses = ", ".join(f"{k} {n}" for k, n in report["not_compared"].items()) or "none"
    human = report["human_overrides"]
    return Tabular(
        title=title,
        columns=["grading", "n", "passed", "rate", "ci_low", "ci_high", "p_value", "test"],
        rows=rows,
        notes=[
            report["definitions"],
            "new - old: Newcombe's paired 95% interval (method 10), McNemar's exact p-value "
            f"({change['note']})",
            f"items {report['items']}, compared {report['compared']}; not compared "
            f"(old->new status): {statuses}",
            f"human overrides on the old gradings: {human['gradings_with_overrides']} "
            f"gradings; the new judge disagrees with {human['answers_disagreeing']} of "
            f"{human['answer_overrides']} answers and {human['verdicts_disagreeing']} of "
            f"{human['verdict_overrides']} verdicts",
        ],
        headline=["n", "passed", "rate", "ci_low", "ci_high", "p_value", "test"],
    )


def _changes_in_words(changed: list[str]) -> str:
    """``["D3-Q1:yes->no", "D3-Q2:yes->no"]`` -> ``"yes->no D3-Q1 D3-Q2"``: short words,
    which wrap in a narrow column where ``D3-Q1:yes->no`` would be cut in two."""
    by_change: dict[str, list[str]] = {}
    for entry in changed:
        question, _, change = entry.partition(":")
        by_change.setdefault(change, []).append(question)
    return "; ".join(f"{change} {' '.join(ids)}" for change, ids in by_change.items())


def _held_flip(item: dict[str, Any]) -> str:
    """``fail->held``, ``held->pass``...: a held item's verdicts, old and new."""
    words = {True: "pass", False: "fail", None: "held"}
    return f"{words[item['previous_passed']]}->{words[item['passed']]}"


def _flipped_table(report: dict[str, Any]) -> Tabular:
    """The submissions whose verdict flipped, pass->fail first, then those with a verdict
    held for a human on either side."""
    listed = [
        (flip, item)
        for flip, key in (("pass->fail", "pass_to_fail"), ("fail->pass", "fail_to_pass"))
        for item in report[key]["items"]
    ] + [(_held_flip(item), item) for item in report["held"]["items"]]
    rows = [
        [
            flip, item["submission_id"], item["agent"], item["scenario_id"],
            item["previous_yes_count"], item["yes_count"],
            _changes_in_words(item["changed_questions"]),
        ]
        for flip, item in listed
    ]  # fmt: skip
    counts = f"pass->fail {report['pass_to_fail']['count']}, "
    counts += f"fail->pass {report['fail_to_pass']['count']}, held {report['held']['count']}"
    return Tabular(
        title=f"Flipped verdicts ({counts})",
        columns=["flip", "submission", "agent", "scenario", "old_yes", "new_yes", "changed"],
        rows=rows,
        notes=["changed: the questions whose answer changed, by change (old->new)"],
    )


def _question_table(report: dict[str, Any]) -> Tabular:
    keys = ("yes->yes", "yes->no", "no->yes", "no->no")
    rows = [[qid, *(counts[k] for k in keys)] for qid, counts in report["questions"].items()]
    return Tabular(title="Answers per question, old -> new", columns=["question", *keys], rows=rows)


def _agreement_table(report: dict[str, Any]) -> Tabular:
    rows = [
        [level, f["n"], f["kappa"], f["ci_low"], f["ci_high"], f["undefined"]]
        for level, f in report["agreement"].items()
    ]
    return Tabular(
        title="Agreement of old and new gradings",
        columns=["level", "n", "kappa", "kappa_ci_low", "kappa_ci_high", "kappa_undefined"],
        rows=rows,
        notes=["kappa: Cohen's, with its 95% interval; undefined (with the reason) when a "
               "grading gave one label only"],
    )  # fmt: skip


def flip_tables(report: dict[str, Any]) -> list[Tabular]:
    """The flip report (:func:`flip_report`, as JSON-ready data) as terminal tables: pass
    rates old and new with the paired test, the flipped submissions, the answers per
    question and the agreement of old and new."""
    job = report.get("job") or {}
    title = (
        f"Regrade job {job.get('id', '?')}: pass rate old -> new ({report['verdicts']} verdicts)"
    )
    tables = [_pass_rate_table(report, title)]
    if (
        report["pass_to_fail"]["count"]
        or report["fail_to_pass"]["count"]
        or report["held"]["count"]
    ):
        tables.append(_flipped_table(report))
    if report["questions"]:
        tables.append(_question_table(report))
    tables.append(_agreement_table(report))
    return tables
