"""Reports as the API and the command line give them: counts from the store, made into
figures with their sample sizes and 95% intervals by :mod:`judge.statistics`.

Pass rates count passed and failed gradings only: unscored, pending and held ones
(passes of diagnoses flagged for injection, waiting for a human verdict) are counted
apart and never as failures or passes. ``verdicts="effective"`` uses the verdicts after
human overrides, ``"judge"`` the judge's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from api.service.reports.models import (
    Arm,
    ComparisonReport,
    DimensionRate,
    DimensionReport,
    GroupRate,
    PassRateReport,
    QuestionRate,
    QuestionReport,
    TagRate,
    TagReport,
)
from judge.statistics import compare_by_scenario, compare_proportions, proportion
from storage import Store
from storage.report_queries import GroupKey, ReportFilter, Verdicts
from storage.reports import OutcomeCounts

__all__ = [
    "comparison_report",
    "dimension_report",
    "filters_echo",
    "pass_rate_report",
    "question_report",
    "tag_report",
]

CLUSTER_NOTE = (
    "some scenarios were attempted several times; attempts of one scenario are "
    "correlated, so the attempt-level interval and p-value are too optimistic: "
    "see by_scenario, where each scenario counts once"
)


def filters_echo(filters: ReportFilter) -> dict[str, Any]:
    """The filters that are set, as JSON-ready values."""
    echo = {k: v for k, v in asdict(filters).items() if v is not None and k != "current_only"}
    if not filters.current_only:
        echo["current_only"] = False
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in echo.items()}


def _key(group_by: Sequence[GroupKey], key: tuple[str | None, ...]) -> dict[str, str | None]:
    return dict(zip(group_by, key, strict=True))


def _group_rate(key: dict[str, str | None], counts: Sequence[OutcomeCounts]) -> GroupRate:
    passed = sum(c.passed for c in counts)
    failed = sum(c.failed for c in counts)
    unscored = sum(c.unscored for c in counts)
    pending = sum(c.pending for c in counts)
    held = sum(c.held for c in counts)
    figure = proportion(passed, passed + failed)
    return GroupRate(
        key=key,
        n=figure.n,
        passed=passed,
        failed=failed,
        unscored=unscored,
        pending=pending,
        held=held,
        total=passed + failed + unscored + pending + held,
        pass_rate=figure.rate,
        interval=figure.interval,
    )


async def pass_rate_report(
    store: Store,
    filters: ReportFilter,
    *,
    group_by: Sequence[GroupKey] = (),
    verdicts: Verdicts = "effective",
) -> PassRateReport:
    """Pass rates with Wilson intervals, overall and per group."""
    counts = await store.reports.outcome_counts(filters, group_by=group_by, verdicts=verdicts)
    return PassRateReport(
        verdicts=verdicts,
        group_by=list(group_by),
        filters=filters_echo(filters),
        overall=_group_rate({}, counts),
        groups=[_group_rate(_key(group_by, c.key), [c]) for c in counts] if group_by else [],
    )


def _arm(filters: ReportFilter, per_scenario: Sequence[OutcomeCounts]) -> Arm:
    named = [c for c in per_scenario if c.key[0] is not None]
    return Arm(
        filters=filters_echo(filters),
        outcome=_group_rate({}, per_scenario),
        scenarios=len(named),
        max_attempts_per_scenario=max((c.passed + c.failed for c in named), default=0),
        without_scenario=sum(c.passed + c.failed for c in per_scenario if c.key[0] is None),
    )


def _by_scenario(per_scenario: Sequence[OutcomeCounts]) -> dict[str, tuple[int, int]]:
    return {
        str(c.key[0]): (c.passed, c.passed + c.failed)
        for c in per_scenario
        if c.key[0] is not None and c.passed + c.failed > 0
    }


async def comparison_report(
    store: Store, a: ReportFilter, b: ReportFilter, *, verdicts: Verdicts = "effective"
) -> ComparisonReport:
    """Arm a's pass rate minus arm b's: Newcombe interval, Fisher's exact p-value.

    When a scenario was attempted more than once in either arm, the comparison is
    repeated with scenarios as the unit, and a note says why.
    """
    counts_a, counts_b = await store.reports.arm_outcomes(a, b, verdicts=verdicts)
    arm_a, arm_b = _arm(a, counts_a), _arm(b, counts_b)
    repeated = max(arm_a.max_attempts_per_scenario, arm_b.max_attempts_per_scenario) > 1
    by_scenario = (
        compare_by_scenario(_by_scenario(counts_a), _by_scenario(counts_b)) if repeated else None
    )
    note = CLUSTER_NOTE if repeated else None
    if repeated and arm_a.without_scenario + arm_b.without_scenario:
        note = f"{note}; gradings without a scenario are left out of by_scenario"
    return ComparisonReport(
        verdicts=verdicts,
        a=arm_a,
        b=arm_b,
        difference=compare_proportions(
            proportion(arm_a.outcome.passed, arm_a.outcome.n),
            proportion(arm_b.outcome.passed, arm_b.outcome.n),
        ),
        by_scenario=by_scenario,
        note=note,
    )


async def question_report(
    store: Store,
    filters: ReportFilter,
    *,
    group_by: Sequence[GroupKey] = (),
    verdicts: Verdicts = "effective",
) -> QuestionReport:
    """Yes rates per question (and group), with Wilson intervals."""
    counts = await store.reports.question_counts(filters, group_by=group_by, verdicts=verdicts)
    questions = []
    for c in counts:
        figure = proportion(c.yes, c.n)
        questions.append(
            QuestionRate(
                key=_key(group_by, c.key),
                question_id=c.question_id,
                dimension_id=c.dimension_id,
                n=c.n,
                yes=c.yes,
                yes_rate=figure.rate,
                interval=figure.interval,
            )
        )
    return QuestionReport(
        verdicts=verdicts,
        group_by=list(group_by),
        filters=filters_echo(filters),
        questions=questions,
    )


async def dimension_report(
    store: Store,
    filters: ReportFilter,
    *,
    group_by: Sequence[GroupKey] = (),
    verdicts: Verdicts = "effective",
) -> DimensionReport:
    """For failed diagnoses: how often each dimension had no yes, or the fewest."""
    counts = await store.reports.dimension_failures(filters, group_by=group_by, verdicts=verdicts)
    return DimensionReport(
        verdicts=verdicts,
        group_by=list(group_by),
        filters=filters_echo(filters),
        dimensions=[
            DimensionRate(
                key=_key(group_by, c.key),
                dimension_id=c.dimension_id,
                failing=c.failing,
                zero_yes=proportion(c.zero_yes, c.failing),
                weakest=proportion(c.weakest, c.failing),
            )
            for c in counts
        ],
    )


async def tag_report(
    store: Store, filters: ReportFilter, *, group_by: Sequence[GroupKey] = ()
) -> TagReport:
    """How many scored gradings carry each failure tag, with Wilson intervals."""
    counts = await store.reports.failure_tag_counts(filters, group_by=group_by)
    tags = []
    for c in counts:
        figure = proportion(c.tagged, c.n)
        tags.append(
            TagRate(
                key=_key(group_by, c.key),
                tag=c.tag,
                tagged=c.tagged,
                n=c.n,
                rate=figure.rate,
                interval=figure.interval,
            )
        )
    return TagReport(group_by=list(group_by), filters=filters_echo(filters), tags=tags)
