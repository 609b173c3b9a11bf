"""Reports as tables (:class:`api.tabular.Tabular`): one shape for the terminal and for CSV.

Rates and interval ends print with three decimals in the terminal and in full in CSV;
every rate comes with its ``n`` and its 95% interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from api.reports.models import (
    ComparisonReport,
    DimensionReport,
    GroupRate,
    PassRateReport,
    QuestionReport,
    TagReport,
)
from api.tabular import Tabular
from judge.statistics import ArmDifference, ScenarioDifference

if TYPE_CHECKING:
    from api.service.attempts import AttemptReport

__all__ = [
    "attempt_table",
    "comparison_table",
    "dimension_table",
    "pass_rate_table",
    "question_table",
    "tag_table",
]

_COUNTS = ["n", "passed", "failed", "unscored", "pending", "held", "provisional", "inline"]


def _key_cells(group_by: Sequence[str], key: dict[str, str | None]) -> list[Any]:
    return [key.get(name) for name in group_by]


def _rate_cells(rate: GroupRate) -> list[Any]:
    return [
        rate.n,
        rate.passed,
        rate.failed,
        rate.unscored,
        rate.pending,
        rate.held,
        rate.provisional,
        rate.inline,
        rate.pass_rate,
        rate.interval.low,
        rate.interval.high,
    ]


def pass_rate_table(report: PassRateReport) -> Tabular:
    """Groups, then the overall row."""
    group_by = list(report.group_by)
    rows = [[*_key_cells(group_by, g.key), *_rate_cells(g)] for g in report.groups]
    overall = ["(all)"] + [None] * (len(group_by) - 1) if group_by else []
    rows.append([*overall, *_rate_cells(report.overall)])
    return Tabular(
        title=f"Pass rates ({report.verdicts} verdicts)",
        columns=[*group_by, *_COUNTS, "pass_rate", "ci_low", "ci_high"],
        rows=rows,
        headline=["n", "pass_rate", "ci_low", "ci_high"],
        notes=[
            *report.scope,
            "n = passed + failed; unscored, pending and held (a pass waiting for a human "
            "verdict: an injection signal, or a judge not yet qualified) are counted apart; "
            "provisional: of all gradings, those by a judge not yet qualified; inline: "
            "gradings against their submitters' own ground truths, counted apart unless "
            "inline=include",
        ],
    )


def _difference_row(label: str, diff: ArmDifference | ScenarioDifference) -> list[Any]:
    interval = diff.interval
    return [
        label,
        *([None] * len(_COUNTS)),
        diff.estimate,
        interval.low if interval else None,
        interval.high if interval else None,
        diff.p_value,
        diff.test,
    ]


#: how each test of a difference of pass rates is described under the table
TEST_NOTES = {
    "mcnemar-exact": "Newcombe's paired 95% interval (method 10), McNemar's exact p-value",
    "fisher-exact": "Newcombe's 95% interval for independent rates, Fisher's exact p-value",
}


def comparison_table(report: ComparisonReport) -> Tabular:
    """Both arms, the difference with attempts as the unit, and with scenarios if needed.

    The ``test`` column and a note name the test of each difference: McNemar's exact
    test when both arms graded the same attempts, Fisher's otherwise.
    """
    rows = [
        [name, *_rate_cells(arm.outcome), None, None]
        for name, arm in (("a", report.a), ("b", report.b))
    ]
    difference = report.difference
    rows.append(_difference_row("a - b", difference))
    method = TEST_NOTES.get(difference.test, difference.test)
    notes = [
        report.definitions,
        *(
            f"{name}: {line}"
            for name, arm in (("a", report.a), ("b", report.b))
            for line in arm.scope
        ),
        f"a - b: {method}" + (f" ({difference.note})" if difference.note else ""),
    ]
    if report.by_scenario is not None:
        rows.append(_difference_row("a - b (by scenario)", report.by_scenario))
        test = f" ({report.by_scenario.test})" if report.by_scenario.test else ""
        notes.append(f"by scenario{test}: {report.by_scenario.note}")
    if report.note:
        notes.append(report.note)
    return Tabular(
        title=f"Comparison ({report.verdicts} verdicts)",
        columns=["arm", *_COUNTS, "rate", "ci_low", "ci_high", "p_value", "test"],
        rows=rows,
        notes=notes,
        headline=["n", "rate", "ci_low", "ci_high", "p_value", "test"],
    )


def question_table(report: QuestionReport) -> Tabular:
    """Yes rate per question."""
    group_by = list(report.group_by)
    rows = [
        [
            *_key_cells(group_by, q.key),
            q.question_id,
            q.dimension_id,
            q.n,
            q.yes,
            q.yes_rate,
            q.interval.low,
            q.interval.high,
        ]
        for q in report.questions
    ]
    return Tabular(
        title=f"Yes rate per question ({report.verdicts} answers)",
        columns=[*group_by, "question", "dimension", "n", "yes", "yes_rate", "ci_low", "ci_high"],
        rows=rows,
        headline=["n", "yes_rate", "ci_low", "ci_high"],
        notes=report.scope,
    )


def dimension_table(report: DimensionReport) -> Tabular:
    """Per dimension, among failed diagnoses: no yes at all, or the fewest yes."""
    group_by = list(report.group_by)
    rows = [
        [
            *_key_cells(group_by, d.key),
            d.dimension_id,
            d.failing,
            d.zero_yes.successes,
            d.zero_yes.rate,
            d.zero_yes.interval.low,
            d.zero_yes.interval.high,
            d.weakest.successes,
            d.weakest.rate,
            d.weakest.interval.low,
            d.weakest.interval.high,
        ]
        for d in report.dimensions
    ]
    columns = ["dimension", "failing", "no_yes", "no_yes_rate", "ci_low", "ci_high"]
    columns += ["weakest", "weakest_rate", "weakest_ci_low", "weakest_ci_high"]
    return Tabular(
        title=f"Dimensions of failed diagnoses ({report.verdicts} verdicts)",
        columns=[*group_by, *columns],
        rows=rows,
        headline=["failing", "no_yes_rate", "ci_low", "ci_high"],
        notes=[
            *report.scope,
            "no_yes: the dimension had no yes (the rule fails it); weakest: fewest yes",
        ],
    )


def tag_table(report: TagReport) -> Tabular:
    """Failure tags, most frequent first."""
    group_by = list(report.group_by)
    rows = [
        [
            *_key_cells(group_by, t.key),
            t.tag,
            t.tagged,
            t.n,
            t.rate,
            t.interval.low,
            t.interval.high,
        ]
        for t in report.tags
    ]
    return Tabular(
        title="Failure tags",
        columns=[*group_by, "tag", "tagged", "n", "rate", "ci_low", "ci_high"],
        rows=rows,
        headline=["n", "rate", "ci_low", "ci_high"],
        notes=[*report.scope, "n = scored gradings (graded or unscored) in the filter"],
    )


def attempt_table(report: AttemptReport) -> Tabular:
    """Attempts per submitter token and registered scenario, most first."""
    rows = [
        [
            i.token_name or i.token_id,
            i.role,
            i.scenario_id,
            i.attempts,
            i.first_at.isoformat(),
            i.last_at.isoformat(),
        ]
        for i in report.items
    ]
    limit = report.limit_per_hour
    return Tabular(
        title="Attempts per token and scenario",
        columns=["token", "role", "scenario", "attempts", "first_at", "last_at"],
        rows=rows,
        notes=[
            f"since {report.since.isoformat()}",
            f"limit: {limit} a scenario per token per hour" if limit else "limit: off",
        ],
    )
