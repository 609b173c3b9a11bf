"""Reports as the API and the command line give them: counts from the store, made into
figures with their sample sizes and 95% intervals by :mod:`judge.statistics`.

Pass rates count passed and failed gradings only: unscored, pending and held ones
(passes waiting for a human verdict) are counted apart and never as failures or passes,
and so, unless a report asks for them, are gradings against their submitters' own
ground truths (``inline``, :func:`api.reports.filter_scope.with_inline_default`).
``verdicts="effective"`` uses the verdicts after human overrides, ``"judge"`` the judge's
own. Every report states its scope in words (:mod:`api.reports.scope`), and a
comparison refuses an arm with nothing to count.
"""

from __future__ import annotations

from collections.abc import Sequence

from api.reports.filter_scope import with_inline_default
from api.reports.filters import GroupKey, ReportFilter, Verdicts
from api.reports.models import (
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
from api.reports.queries import ArmReading, OutcomeCounts, ReportQueries
from api.reports.scope import VERDICTS_MEANING, filter_text, filters_echo, scope_lines
from api.service.errors import InvalidRequest
from judge.statistics import (
    ArmDifference,
    compare_by_scenario,
    compare_paired,
    compare_proportions,
    paired_counts,
    proportion,
)
from storage import Store

__all__ = [
    "arm_difference",
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


def _key(group_by: Sequence[GroupKey], key: tuple[str | None, ...]) -> dict[str, str | None]:
    return dict(zip(group_by, key, strict=True))


def _group_rate(key: dict[str, str | None], counts: Sequence[OutcomeCounts]) -> GroupRate:
    passed = sum(c.passed for c in counts)
    failed = sum(c.failed for c in counts)
    unscored = sum(c.unscored for c in counts)
    pending = sum(c.pending for c in counts)
    held = sum(c.held for c in counts)
    provisional = sum(c.provisional for c in counts)
    inline = sum(c.inline for c in counts)
    figure = proportion(passed, passed + failed)
    return GroupRate(
        key=key,
        n=figure.n,
        passed=passed,
        failed=failed,
        unscored=unscored,
        pending=pending,
        held=held,
        provisional=provisional,
        inline=inline,
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
    filters = with_inline_default(filters, group_by)
    counts = await ReportQueries(store.db).outcome_counts(
        filters, group_by=group_by, verdicts=verdicts
    )
    overall = _group_rate({}, counts)
    return PassRateReport(
        verdicts=verdicts,
        group_by=list(group_by),
        filters=filters_echo(filters),
        overall=overall,
        groups=[_group_rate(_key(group_by, c.key), [c]) for c in counts] if group_by else [],
        scope=scope_lines(
            filters,
            verdicts,
            provisional=overall.provisional,
            total=overall.total,
            group_by=list(group_by),
            inline=overall.inline,
        ),
    )


async def _scope(
    store: Store, filters: ReportFilter, verdicts: Verdicts | None, group_by: Sequence[GroupKey]
) -> tuple[int, list[str]]:
    """Provisional gradings in the filter, and the report's scope in words."""
    overall = _group_rate({}, await ReportQueries(store.db).outcome_counts(filters))
    lines = scope_lines(
        filters,
        verdicts,
        provisional=overall.provisional,
        total=overall.total,
        group_by=list(group_by),
        inline=overall.inline,
    )
    return overall.provisional, lines


def _arm(name: str, filters: ReportFilter, per_scenario: Sequence[OutcomeCounts]) -> Arm:
    named = [c for c in per_scenario if c.key[0] is not None]
    outcome = _group_rate({}, per_scenario)
    if outcome.n == 0:
        raise InvalidRequest(_empty_arm(name, filters, outcome), field=f"{name}.*")
    return Arm(
        filters=filters_echo(filters),
        outcome=outcome,
        scope=scope_lines(
            filters,
            None,
            provisional=outcome.provisional,
            total=outcome.total,
            inline=outcome.inline,
        ),
        scenarios=len(named),
        max_attempts_per_scenario=max((c.passed + c.failed for c in named), default=0),
        without_scenario=sum(c.passed + c.failed for c in per_scenario if c.key[0] is None),
    )


def _empty_arm(name: str, filters: ReportFilter, outcome: GroupRate) -> str:
    """Why arm ``name`` has nothing to compare, and what might be missing."""
    detail = (
        f"arm {name} ({filter_text(filters)}) has no passed or failed grading (n=0; "
        f"{outcome.unscored} unscored, {outcome.pending} pending, {outcome.held} held): "
        "nothing to compare"
    )
    if filters.include != "shadow" and filters.current_only:
        detail += f"; gradings of a shadow regrade count only with {name}.include=shadow"
    if outcome.inline:
        detail += (
            f"; {outcome.inline} gradings against inline ground truths count only with "
            f"{name}.inline=include"
        )
    return detail


def _by_scenario(per_scenario: Sequence[OutcomeCounts]) -> dict[str, tuple[int, int]]:
    return {
        str(c.key[0]): (c.passed, c.passed + c.failed)
        for c in per_scenario
        if c.key[0] is not None and c.passed + c.failed > 0
    }


def arm_difference(a: ArmReading, b: ArmReading) -> ArmDifference:
    """Arm a's pass rate minus arm b's, paired when both arms graded the same attempts.

    Paired (two judges, two rubric versions ... over one set of submissions, each graded
    once by each arm): McNemar's exact test on the discordant attempts and Newcombe's
    paired interval (method 10). Otherwise (different attempts, only some in common, or
    an arm counting one attempt twice): Fisher's exact test and Newcombe's interval for
    independent rates. ``note`` says which and why.
    """
    rate_a, rate_b = (
        proportion(
            sum(c.passed for c in arm.per_scenario),
            sum(c.passed + c.failed for c in arm.per_scenario),
        )
        for arm in (a, b)
    )
    twice = [
        name for name, arm in (("a", a), ("b", b)) if any(len(v) > 1 for v in arm.verdicts.values())
    ]
    if twice:
        note = (
            f"unpaired: arm {' and '.join(twice)} counts some attempts more than once "
            "(several gradings of one submission)"
        )
        return compare_proportions(rate_a, rate_b, note=note)
    pairs = paired_counts(
        {k: v[0] for k, v in a.verdicts.items()}, {k: v[0] for k, v in b.verdicts.items()}
    )
    if pairs is None:
        common = len(set(a.verdicts) & set(b.verdicts))
        note = (
            "unpaired: the arms graded different attempts"
            if not common
            else f"unpaired: the arms share {common} of their attempts, not all "
            f"(a: {len(a.verdicts)}, b: {len(b.verdicts)}); filter both to the same "
            "attempts for a paired comparison"
        )
        return compare_proportions(rate_a, rate_b, note=note)
    note = (
        f"paired: both arms graded the same {pairs.n} attempts; {pairs.only_a} passed by "
        f"a only, {pairs.only_b} by b only"
    )
    return compare_paired(pairs, note=note)


async def comparison_report(
    store: Store, a: ReportFilter, b: ReportFilter, *, verdicts: Verdicts = "effective"
) -> ComparisonReport:
    """Arm a's pass rate minus arm b's (:func:`arm_difference`: McNemar's exact test and
    Newcombe's paired interval when both arms graded the same attempts, else Fisher's
    exact test and Newcombe's interval for independent rates).

    When a scenario was attempted more than once in either arm, the comparison is
    repeated with scenarios as the unit, and a note says why.
    """
    a, b = with_inline_default(a), with_inline_default(b)
    reading_a, reading_b = await ReportQueries(store.db).arm_readings(a, b, verdicts=verdicts)
    counts_a, counts_b = reading_a.per_scenario, reading_b.per_scenario
    arm_a, arm_b = _arm("a", a, counts_a), _arm("b", b, counts_b)
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
        difference=arm_difference(reading_a, reading_b),
        by_scenario=by_scenario,
        note=note,
        definitions=f"verdicts: {VERDICTS_MEANING[verdicts]}",
    )


async def question_report(
    store: Store,
    filters: ReportFilter,
    *,
    group_by: Sequence[GroupKey] = (),
    verdicts: Verdicts = "effective",
) -> QuestionReport:
    """Yes rates per question (and group), with Wilson intervals."""
    filters = with_inline_default(filters, group_by)
    counts = await ReportQueries(store.db).question_counts(
        filters, group_by=group_by, verdicts=verdicts
    )
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
    provisional, scope = await _scope(store, filters, verdicts, group_by)
    return QuestionReport(
        verdicts=verdicts,
        group_by=list(group_by),
        filters=filters_echo(filters),
        questions=questions,
        provisional=provisional,
        scope=scope,
    )


async def dimension_report(
    store: Store,
    filters: ReportFilter,
    *,
    group_by: Sequence[GroupKey] = (),
    verdicts: Verdicts = "effective",
) -> DimensionReport:
    """For failed diagnoses: how often each dimension had no yes, or the fewest."""
    filters = with_inline_default(filters, group_by)
    counts = await ReportQueries(store.db).dimension_failures(
        filters, group_by=group_by, verdicts=verdicts
    )
    provisional, scope = await _scope(store, filters, verdicts, group_by)
    return DimensionReport(
        provisional=provisional,
        scope=scope,
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
    filters = with_inline_default(filters, group_by)
    counts = await ReportQueries(store.db).failure_tag_counts(filters, group_by=group_by)
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
    provisional, scope = await _scope(store, filters, None, group_by)
    return TagReport(
        group_by=list(group_by),
        filters=filters_echo(filters),
        tags=tags,
        provisional=provisional,
        scope=scope,
    )
