"""Pass rates with their uncertainty: Wilson intervals, arm differences, exact tests.

Every figure a user sees comes with its sample size and a confidence interval:

- one proportion: the Wilson score interval (scipy's ``binomtest(...).proportion_ci``),
  which behaves at small n and near 0 and 1, unlike the normal approximation;
- the difference of two independent proportions (arms that graded different
  attempts): Newcombe's hybrid score interval (his method 10 for independent
  proportions), built from the two Wilson intervals, with Fisher's exact test for the
  p-value;
- the difference of two paired proportions (both arms graded the same attempts, e.g.
  two judges or two rubric versions over one set of submissions): Newcombe's
  square-and-add interval for paired proportions (his method 10 of the paired paper,
  1998b), built from the Wilson intervals of the two marginal rates with a correction
  for their correlation, with McNemar's exact test (a binomial test of the discordant
  pairs at 1/2) for the p-value. Counting such arms as independent ignores that an
  attempt easy for one judge is easy for the other: the interval comes out too wide
  and the p-value too large when the arms agree on most attempts, as judges do;
- the same difference with scenarios as the unit, for when one scenario was attempted
  several times: attempts of one scenario are correlated, so counting them as
  independent makes intervals too narrow. Each scenario contributes its pass rate;
  scenarios common to both arms are compared paired (one-sample t on the
  per-scenario differences), otherwise the per-scenario rates are compared with
  Welch's t-test.

No web and no database here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "CONFIDENCE",
    "ArmDifference",
    "Interval",
    "PairedCounts",
    "Proportion",
    "ScenarioDifference",
    "compare_by_scenario",
    "compare_paired",
    "compare_proportions",
    "fisher_exact_p",
    "mcnemar_exact_p",
    "newcombe_difference",
    "newcombe_paired_difference",
    "paired_counts",
    "proportion",
    "wilson_interval",
]

#: the confidence level of every interval unless said otherwise
CONFIDENCE = 0.95


class Interval(BaseModel):
    """A confidence interval ``[low, high]`` at ``confidence``, and how it was computed."""

    model_config = ConfigDict(frozen=True)

    low: float
    high: float
    confidence: float = CONFIDENCE
    method: str

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies inside the interval (ends included)."""
        return self.low <= value <= self.high


class Proportion(BaseModel):
    """``successes`` out of ``n``, the rate (None when n is 0) and its Wilson interval."""

    model_config = ConfigDict(frozen=True)

    successes: int
    n: int
    rate: float | None
    interval: Interval


def wilson_interval(successes: int, n: int, *, confidence: float = CONFIDENCE) -> Interval:
    """The Wilson score interval of ``successes / n``; ``[0, 1]`` when n is 0."""
    if n < 0 or not 0 <= successes <= max(n, 0):
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return Interval(low=0.0, high=1.0, confidence=confidence, method="wilson")
    from scipy import stats  # imported when a figure is computed: scipy takes ~0.5 s

    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return Interval(
        low=max(0.0, float(ci.low)),
        high=min(1.0, float(ci.high)),
        confidence=confidence,
        method="wilson",
    )


def proportion(successes: int, n: int, *, confidence: float = CONFIDENCE) -> Proportion:
    """A proportion with its Wilson interval."""
    return Proportion(
        successes=successes,
        n=n,
        rate=successes / n if n else None,
        interval=wilson_interval(successes, n, confidence=confidence),
    )


def _wilson_at(arm: Proportion, confidence: float) -> Interval:
    """The arm's Wilson interval at ``confidence``: its own when it has that one already."""
    if arm.interval.method == "wilson" and arm.interval.confidence == confidence:
        return arm.interval
    return wilson_interval(arm.successes, arm.n, confidence=confidence)


def newcombe_difference(a: Proportion, b: Proportion) -> Interval | None:
    """Newcombe's hybrid score interval of ``a.rate - b.rate``; None if an arm is empty.

    Built from the arms' Wilson intervals ``[l, u]`` at ``a``'s confidence (Newcombe
    1998, method 10; statsmodels' ``confint_proportions_2indep(..., method="newcombe")``
    gives the same figures)::

        low  = (p_a - p_b) - sqrt((p_a - l_a)^2 + (u_b - p_b)^2)
        high = (p_a - p_b) + sqrt((u_a - p_a)^2 + (p_b - l_b)^2)
    """
    if a.rate is None or b.rate is None:
        return None
    confidence = a.interval.confidence
    wilson_a, wilson_b = (_wilson_at(arm, confidence) for arm in (a, b))
    difference = a.rate - b.rate
    low = difference - math.hypot(a.rate - wilson_a.low, wilson_b.high - b.rate)
    high = difference + math.hypot(wilson_a.high - a.rate, b.rate - wilson_b.low)
    return Interval(
        low=max(-1.0, low),
        high=min(1.0, high),
        confidence=confidence,
        method="newcombe-wilson",
    )


def fisher_exact_p(a: Proportion, b: Proportion) -> float | None:
    """Two-sided p-value of Fisher's exact test on the 2x2 table; None if an arm is empty."""
    if a.n == 0 or b.n == 0:
        return None
    table = [[a.successes, a.n - a.successes], [b.successes, b.n - b.successes]]
    from scipy import stats

    return float(stats.fisher_exact(table, alternative="two-sided").pvalue)


class PairedCounts(BaseModel):
    """Attempts graded by both arms, by the two verdicts: the paired 2x2 table."""

    model_config = ConfigDict(frozen=True)

    #: both arms passed the attempt
    both: int
    #: arm a passed it, arm b failed it (a discordant pair)
    only_a: int
    #: arm b passed it, arm a failed it (the other discordant pair)
    only_b: int
    #: both arms failed it
    neither: int

    @property
    def n(self) -> int:
        """Attempts graded by both arms."""
        return self.both + self.only_a + self.only_b + self.neither


class ArmDifference(BaseModel):
    """Arm a's pass rate minus arm b's, with an interval and an exact test.

    ``design`` says whether the arms graded the same attempts (``paired``: McNemar's
    exact test and Newcombe's paired interval, ``pairs`` holding the 2x2 table) or not
    (``unpaired``: Fisher's exact test and Newcombe's interval for independent rates);
    ``test`` and ``interval.method`` name what was computed, ``note`` says why.
    """

    model_config = ConfigDict(frozen=True)

    estimate: float | None
    interval: Interval | None
    p_value: float | None
    test: str = "fisher-exact"
    design: Literal["paired", "unpaired"] = "unpaired"
    pairs: PairedCounts | None = None
    note: str | None = None


def compare_proportions(a: Proportion, b: Proportion, *, note: str | None = None) -> ArmDifference:
    """Difference of two independent proportions: Newcombe interval, Fisher p-value."""
    estimate = a.rate - b.rate if a.rate is not None and b.rate is not None else None
    return ArmDifference(
        estimate=estimate,
        interval=newcombe_difference(a, b),
        p_value=fisher_exact_p(a, b),
        test="fisher-exact",
        design="unpaired",
        note=note,
    )


def paired_counts(a: Mapping[str, bool], b: Mapping[str, bool]) -> PairedCounts | None:
    """The paired table of two arms' verdicts by attempt; None unless both graded the
    same attempts (the same keys), the only case where a paired test applies."""
    if not a or set(a) != set(b):
        return None
    both = sum(1 for key, passed in a.items() if passed and b[key])
    only_a = sum(1 for key, passed in a.items() if passed and not b[key])
    only_b = sum(1 for key, passed in a.items() if not passed and b[key])
    return PairedCounts(
        both=both, only_a=only_a, only_b=only_b, neither=len(a) - both - only_a - only_b
    )


def mcnemar_exact_p(pairs: PairedCounts) -> float | None:
    """Two-sided p-value of McNemar's exact test; None when no attempt was graded twice.

    Under "no difference" each discordant pair is as likely to be an ``only_a`` as an
    ``only_b``: the p-value is scipy's two-sided ``binomtest(only_a, only_a + only_b,
    0.5)``. With no discordant pair at all the arms agree on every attempt: p = 1.
    """
    if pairs.n == 0:
        return None
    discordant = pairs.only_a + pairs.only_b
    if discordant == 0:
        return 1.0
    from scipy import stats

    return float(stats.binomtest(pairs.only_a, discordant, 0.5).pvalue)


def _paired_correlation(pairs: PairedCounts) -> float:
    """Newcombe's (continuity-corrected) estimate of the correlation of the two marginal
    rates: 0 when a margin is empty or when ``both*neither - only_a*only_b`` lies in
    ``[0, n/2]``, less ``n/2`` above that, as it is below 0."""
    a, b, c, d, n = pairs.both, pairs.only_a, pairs.only_b, pairs.neither, pairs.n
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    if margins == 0:
        return 0.0
    cross = a * d - b * c
    if cross > n / 2:
        return (cross - n / 2) / math.sqrt(margins)
    return 0.0 if cross >= 0 else cross / math.sqrt(margins)


def newcombe_paired_difference(
    pairs: PairedCounts, *, confidence: float = CONFIDENCE
) -> Interval | None:
    """Newcombe's square-and-add interval of ``rate_a - rate_b`` for paired attempts.

    Newcombe (1998), "Improved confidence intervals for the difference between binomial
    proportions based on paired data", method 10 (as in Fagerland, Lydersen and Laake's
    ``Newcombe_square_and_add_CI_paired_2x2``): with the Wilson intervals ``[l, u]`` of
    the marginal rates ``p_a = (both + only_a) / n`` and ``p_b = (both + only_b) / n``
    and their correlation ``phi`` (:func:`_paired_correlation`)::

        low  = (p_a - p_b) - sqrt((p_a - l_a)^2 - 2 phi (p_a - l_a)(u_b - p_b) + (u_b - p_b)^2)
        high = (p_a - p_b) + sqrt((p_b - l_b)^2 - 2 phi (p_b - l_b)(u_a - p_a) + (u_a - p_a)^2)

    None when no attempt was graded by both arms.
    """
    n = pairs.n
    if n == 0:
        return None
    passed_a, passed_b = pairs.both + pairs.only_a, pairs.both + pairs.only_b
    p_a, p_b = passed_a / n, passed_b / n
    wilson_a = wilson_interval(passed_a, n, confidence=confidence)
    wilson_b = wilson_interval(passed_b, n, confidence=confidence)
    phi = _paired_correlation(pairs)

    def spread(x: float, y: float) -> float:
        return math.sqrt(max(0.0, x * x - 2 * phi * x * y + y * y))

    difference = p_a - p_b
    low = difference - spread(p_a - wilson_a.low, wilson_b.high - p_b)
    high = difference + spread(p_b - wilson_b.low, wilson_a.high - p_a)
    return Interval(
        low=max(-1.0, low), high=min(1.0, high), confidence=confidence, method="newcombe-paired"
    )


def compare_paired(
    pairs: PairedCounts, *, confidence: float = CONFIDENCE, note: str | None = None
) -> ArmDifference:
    """Difference of two paired proportions: Newcombe's paired interval, McNemar's exact p."""
    n = pairs.n
    return ArmDifference(
        estimate=(pairs.only_a - pairs.only_b) / n if n else None,
        interval=newcombe_paired_difference(pairs, confidence=confidence),
        p_value=mcnemar_exact_p(pairs),
        test="mcnemar-exact",
        design="paired",
        pairs=pairs,
        note=note,
    )


class ScenarioDifference(BaseModel):
    """The arms compared with each scenario's pass rate as one observation."""

    model_config = ConfigDict(frozen=True)

    design: Literal["paired", "unpaired", "insufficient"]
    #: scenarios used in each arm (for paired: the scenarios both arms attempted)
    scenarios_a: int
    scenarios_b: int
    estimate: float | None
    interval: Interval | None
    p_value: float | None
    test: str | None
    note: str


#: per scenario: (passed, n) of one arm
ScenarioCounts = Mapping[str, tuple[int, int]]


def _rates(counts: ScenarioCounts) -> dict[str, Fraction]:
    """Each attempted scenario's pass rate, exact: equal rates and equal differences of
    rates (2/3 - 1/3 and 5/6 - 3/6) compare equal, as their doubles need not."""
    return {key: Fraction(passed, n) for key, (passed, n) in counts.items() if n > 0}


def _mean(values: list[Fraction]) -> Fraction:
    return sum(values, Fraction(0)) / len(values)


def _floats(values: list[Fraction]) -> list[float]:
    return [float(value) for value in values]


def _insufficient(rates_a: dict[str, Fraction], rates_b: dict[str, Fraction]) -> ScenarioDifference:
    return ScenarioDifference(
        design="insufficient",
        scenarios_a=len(rates_a),
        scenarios_b=len(rates_b),
        estimate=None,
        interval=None,
        p_value=None,
        test=None,
        note="too few scenarios to compare with scenarios as the unit",
    )


def _t_result(result: Any, *, confidence: float, test: str) -> tuple[Interval | None, float | None]:
    """A t-test's interval (clipped to [-1, 1], as rates differ by at most 1) and p-value."""
    ci = result.confidence_interval(confidence_level=confidence)
    low, high, p_value = float(ci.low), float(ci.high), float(result.pvalue)
    if not all(math.isfinite(x) for x in (low, high, p_value)):
        return None, None
    interval = Interval(low=max(-1.0, low), high=min(1.0, high), confidence=confidence, method=test)
    return interval, p_value


def compare_by_scenario(
    a: ScenarioCounts, b: ScenarioCounts, *, confidence: float = CONFIDENCE
) -> ScenarioDifference:
    """Compare per-scenario pass rates: paired on common scenarios, else Welch's t-test.

    When the scenarios do not vary at all (every paired difference equal, or every
    rate equal within each arm) there is no spread to estimate an interval from: the
    estimate is given without interval and p-value, and the note says so. Rates and
    differences are compared exactly (as fractions), so equal ones count as equal even
    when their floating-point values differ in the last bit.
    """
    from scipy import stats

    rates_a, rates_b = _rates(a), _rates(b)
    common = sorted(set(rates_a) & set(rates_b))
    if len(common) >= 2:
        diffs = [rates_a[key] - rates_b[key] for key in common]
        design: Literal["paired", "unpaired"] = "paired"
        test, used_a, used_b = "paired-t", len(common), len(common)
        estimate = float(_mean(diffs))
        note = f"paired over the {len(common)} scenarios both arms attempted"
        constant = len(set(diffs)) == 1
        result = None if constant else stats.ttest_1samp(_floats(diffs), 0.0)
    elif len(rates_a) >= 2 and len(rates_b) >= 2:
        values_a, values_b = list(rates_a.values()), list(rates_b.values())
        design, test, used_a, used_b = "unpaired", "welch-t", len(values_a), len(values_b)
        estimate = float(_mean(values_a) - _mean(values_b))
        note = "the arms share fewer than 2 scenarios: per-scenario rates compared unpaired"
        constant = len(set(values_a)) == 1 and len(set(values_b)) == 1
        floats_a, floats_b = _floats(values_a), _floats(values_b)
        result = None if constant else stats.ttest_ind(floats_a, floats_b, equal_var=False)
    else:
        return _insufficient(rates_a, rates_b)
    interval, p_value = (
        (None, None) if result is None else _t_result(result, confidence=confidence, test=test)
    )
    if interval is None:
        note += "; the scenarios do not vary, so no interval can be estimated"
    return ScenarioDifference(
        design=design,
        scenarios_a=used_a,
        scenarios_b=used_b,
        estimate=estimate,
        interval=interval,
        p_value=p_value,
        test=test,
        note=note,
    )
