"""Report statistics against textbook values."""

from __future__ import annotations

import math

import pytest

from judge.statistics import (
    PairedCounts,
    compare_by_scenario,
    compare_paired,
    compare_proportions,
    fisher_exact_p,
    mcnemar_exact_p,
    newcombe_difference,
    newcombe_paired_difference,
    paired_counts,
    proportion,
    wilson_interval,
)


def test_wilson_interval_of_19_of_27_is_the_textbook_value() -> None:
    interval = wilson_interval(19, 27)
    assert (round(interval.low, 3), round(interval.high, 3)) == (0.515, 0.841)
    assert interval.method == "wilson" and interval.confidence == 0.95
    assert proportion(19, 27).rate == pytest.approx(0.7037, abs=1e-4)


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        (0, 10, 0.0, 0.2775),  # Wilson's interval stays inside [0, 1] at the edges
        (10, 10, 0.7225, 1.0),
        (81, 263, 0.2553, 0.3662),  # Agresti & Coull's example
    ],
)
def test_wilson_interval_at_the_edges_and_a_second_reference(
    successes: int, n: int, low: float, high: float
) -> None:
    interval = wilson_interval(successes, n)
    assert interval.low == pytest.approx(low, abs=1e-4)
    assert interval.high == pytest.approx(high, abs=1e-4)


def test_no_observations_have_no_rate_and_the_whole_interval() -> None:
    empty = proportion(0, 0)
    assert empty.rate is None and (empty.interval.low, empty.interval.high) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(5, 3)


def test_newcombe_hybrid_interval_matches_newcombe_1998() -> None:
    # Newcombe (1998), method 10, example (a): 56/70 vs 48/80 -> 0.0524 to 0.3339
    interval = newcombe_difference(proportion(56, 70), proportion(48, 80))
    assert interval is not None
    assert interval.low == pytest.approx(0.0524, abs=1e-4)
    assert interval.high == pytest.approx(0.3339, abs=1e-4)


@pytest.mark.parametrize("confidence", [0.95, 0.9])
@pytest.mark.parametrize(("n1", "n2"), [(1, 1), (3, 9), (10, 4), (17, 30), (70, 2)])
def test_newcombe_interval_is_the_formula_over_the_wilson_intervals(
    n1: int, n2: int, confidence: float
) -> None:
    """L = d - sqrt((p1 - l1)^2 + (u2 - p2)^2), U = d + sqrt((u1 - p1)^2 + (p2 - l2)^2)."""
    for s1 in range(n1 + 1):
        for s2 in range(n2 + 1):
            a = proportion(s1, n1, confidence=confidence)
            b = proportion(s2, n2, confidence=confidence)
            p1, p2 = s1 / n1, s2 / n2
            (l1, u1), (l2, u2) = (
                (a.interval.low, a.interval.high),
                (b.interval.low, b.interval.high),
            )
            interval = newcombe_difference(a, b)
            assert interval is not None and interval.confidence == confidence
            assert interval.low == pytest.approx(
                max(-1.0, p1 - p2 - math.hypot(p1 - l1, u2 - p2)), abs=1e-12
            )
            assert interval.high == pytest.approx(
                min(1.0, p1 - p2 + math.hypot(u1 - p1, p2 - l2)), abs=1e-12
            )
    assert newcombe_difference(proportion(0, 0), proportion(1, 2)) is None


def test_21_of_27_against_19_of_27_is_not_a_detectable_difference() -> None:
    difference = compare_proportions(proportion(21, 27), proportion(19, 27))
    assert difference.estimate == pytest.approx(2 / 27)
    assert difference.interval is not None and difference.interval.contains(0.0)
    assert (round(difference.interval.low, 3), round(difference.interval.high, 3)) == (
        -0.157,
        0.295,
    )
    assert difference.p_value == pytest.approx(0.757, abs=1e-3)


def test_fisher_exact_p_of_the_lady_tasting_tea() -> None:
    # Fisher's tea-tasting table [[3, 1], [1, 3]]: two-sided p = 0.4857
    assert fisher_exact_p(proportion(3, 4), proportion(1, 4)) == pytest.approx(0.4857, abs=1e-4)
    assert fisher_exact_p(proportion(0, 0), proportion(1, 4)) is None


def test_comparison_with_an_empty_arm_has_no_estimate() -> None:
    difference = compare_proportions(proportion(0, 0), proportion(3, 4))
    assert difference.estimate is None and difference.interval is None
    assert difference.p_value is None


def test_scenarios_as_the_unit_paired_on_common_scenarios() -> None:
    a = {"s1": (3, 3), "s2": (2, 3), "s3": (0, 3)}
    b = {"s1": (1, 3), "s2": (2, 3), "s3": (1, 3), "only-b": (3, 3)}
    result = compare_by_scenario(a, b)
    assert result.design == "paired" and result.scenarios_a == result.scenarios_b == 3
    assert result.estimate == pytest.approx((2 / 3 + 0 - 1 / 3) / 3)
    assert result.interval is not None and result.interval.contains(0.0)
    assert result.interval.low >= -1.0 and result.interval.high <= 1.0
    assert result.p_value is not None and 0 < result.p_value < 1


def test_scenarios_as_the_unit_unpaired_when_arms_share_too_few() -> None:
    result = compare_by_scenario({"s1": (3, 3), "s2": (1, 3)}, {"s3": (0, 3), "s4": (1, 3)})
    assert result.design == "unpaired" and result.test == "welch-t"
    assert result.estimate == pytest.approx(2 / 3 - 1 / 6)


def test_scenarios_that_do_not_vary_give_no_interval_and_one_scenario_is_too_few() -> None:
    flat = compare_by_scenario({"s1": (2, 2), "s2": (2, 2)}, {"s1": (1, 2), "s2": (1, 2)})
    assert flat.estimate == pytest.approx(0.5)
    assert flat.interval is None and flat.p_value is None and "do not vary" in flat.note
    few = compare_by_scenario({"s1": (2, 2)}, {"s1": (1, 2)})
    assert few.design == "insufficient" and few.estimate is None


def test_equal_scenario_differences_give_no_interval_even_when_their_doubles_differ() -> None:
    """Every scenario improving by exactly a third is a difference that does not vary:
    2/3 - 1/3 and 5/6 - 3/6 are equal, though not as doubles, and get no interval."""
    result = compare_by_scenario({"A": (2, 3), "B": (5, 6)}, {"A": (1, 3), "B": (3, 6)})
    assert result.design == "paired"
    assert result.estimate == pytest.approx(1 / 3)
    assert result.interval is None and result.p_value is None
    assert "do not vary" in result.note


# Figures of statsmodels 0.14 (``confint_proportions_2indep(..., method="newcombe",
# compare="diff")``, rounded to 1e-12), which computed the interval here before:
# (successes a, n a, successes b, n b, confidence, low, high).
STATSMODELS_NEWCOMBE = [
    (56, 70, 48, 80, 0.95, 0.052431472402, 0.333872654037),
    (21, 27, 19, 27, 0.95, -0.156865259794, 0.295494496927),
    (0, 10, 0, 10, 0.95, -0.277532799863, 0.277532799863),
    (10, 10, 10, 10, 0.95, -0.277532799863, 0.277532799863),
    (5, 10, 5, 10, 0.95, -0.37251362382, 0.37251362382),
    (0, 10, 10, 10, 0.95, -1.0, -0.607509350431),
    (10, 10, 0, 10, 0.95, 0.607509350431, 1.0),
    (1, 1, 0, 1, 0.95, -0.122108720682, 1.0),
    (0, 1, 1, 1, 0.95, -1.0, 0.122108720682),
    (1, 1, 1, 1, 0.95, -0.793450685623, 0.793450685623),
    (0, 1, 0, 1, 0.95, -0.793450685623, 0.793450685623),
    (5, 5, 0, 5, 0.95, 0.38554900569, 1.0),
    (3, 4, 1, 4, 0.95, -0.135488400583, 0.789083268085),
    (2, 3, 1, 9, 0.95, -0.006219584637, 0.84229388528),
    (7, 7, 13, 20, 0.95, -0.042487270449, 0.567145723315),
    (810, 1000, 790, 1000, 0.95, -0.015081958572, 0.055034359754),
    (9, 10, 3, 10, 0.9, 0.242112400885, 0.789623507372),
    (9, 10, 3, 10, 0.99, 0.043026966615, 0.837405067895),
    (0, 25, 1, 3, 0.95, -0.792340399198, -0.030615781359),
    (1, 30, 0, 2, 0.9, -0.542217372871, 0.136404142152),
]


@pytest.mark.parametrize(
    ("successes_a", "n_a", "successes_b", "n_b", "confidence", "low", "high"),
    STATSMODELS_NEWCOMBE,
)
def test_newcombe_interval_is_statsmodels_figures(
    successes_a: int,
    n_a: int,
    successes_b: int,
    n_b: int,
    confidence: float,
    low: float,
    high: float,
) -> None:
    """0/n, n/n, n = 1, equal arms, small and large n, three confidences, to 1e-9."""
    interval = newcombe_difference(
        proportion(successes_a, n_a, confidence=confidence),
        proportion(successes_b, n_b, confidence=confidence),
    )
    assert interval is not None
    assert (interval.confidence, interval.method) == (confidence, "newcombe-wilson")
    assert interval.low == pytest.approx(low, abs=1e-9)
    assert interval.high == pytest.approx(high, abs=1e-9)
    assert -1.0 <= interval.low <= interval.high <= 1.0


def test_newcombe_interval_takes_the_first_arms_confidence() -> None:
    """An arm given at another confidence is taken at the first arm's confidence."""
    interval = newcombe_difference(
        proportion(9, 10, confidence=0.9), proportion(3, 10, confidence=0.99)
    )
    assert interval is not None and interval.confidence == 0.9
    assert (interval.low, interval.high) == pytest.approx(
        (0.242112400885, 0.789623507372), abs=1e-9
    )
    assert newcombe_difference(proportion(3, 4), proportion(0, 0)) is None


def test_mcnemar_exact_p_by_hand() -> None:
    # 11 discordant pairs, 9 one way and 2 the other: under no difference each goes
    # either way with probability 1/2, so p = 2 * P(X <= 2), X ~ Binomial(11, 1/2)
    # = 2 * (1 + 11 + 55) / 2^11 = 134 / 2048
    pairs = PairedCounts(both=20, only_a=9, only_b=2, neither=5)
    assert mcnemar_exact_p(pairs) == pytest.approx(134 / 2048, rel=1e-12)
    # the concordant pairs do not matter, nor which arm has the 9
    assert mcnemar_exact_p(PairedCounts(both=0, only_a=2, only_b=9, neither=0)) == (
        pytest.approx(134 / 2048, rel=1e-12)
    )
    # no discordant pair: the arms agree on every attempt
    assert mcnemar_exact_p(PairedCounts(both=3, only_a=0, only_b=0, neither=3)) == 1.0
    assert mcnemar_exact_p(PairedCounts(both=0, only_a=0, only_b=0, neither=0)) is None


def _wilson_by_hand(successes: int, n: int) -> tuple[float, float]:
    z = 1.959963984540054
    p = successes / n
    centre, spread = 2 * n * p + z * z, z * math.sqrt(z * z + 4 * n * p * (1 - p))
    return (centre - spread) / (2 * (n + z * z)), (centre + spread) / (2 * (n + z * z))


def test_newcombe_paired_interval_by_hand() -> None:
    # Altman et al., Statistics with Confidence, table 6.2: 14 both, 5 a only, 0 b only,
    # 22 neither; a*d - b*c = 308 > n/2, so phi = (308 - 20.5) / sqrt(19 * 22 * 14 * 27)
    pairs = PairedCounts(both=14, only_a=5, only_b=0, neither=22)
    p_a, p_b = 19 / 41, 14 / 41
    (l_a, u_a), (l_b, u_b) = _wilson_by_hand(19, 41), _wilson_by_hand(14, 41)
    phi = (14 * 22 - 5 * 0 - 41 / 2) / math.sqrt(19 * 22 * 14 * 27)
    low = (p_a - p_b) - math.sqrt(
        (p_a - l_a) ** 2 - 2 * phi * (p_a - l_a) * (u_b - p_b) + (u_b - p_b) ** 2
    )
    high = (p_a - p_b) + math.sqrt(
        (p_b - l_b) ** 2 - 2 * phi * (p_b - l_b) * (u_a - p_a) + (u_a - p_a) ** 2
    )

    interval = newcombe_paired_difference(pairs)

    assert interval is not None and interval.method == "newcombe-paired"
    assert (interval.low, interval.high) == (pytest.approx(low), pytest.approx(high))
    assert (round(interval.low, 4), round(interval.high, 4)) == (0.0115, 0.2265)
    # the same rates counted as independent arms: a wider interval, another test
    unpaired = compare_proportions(proportion(19, 41), proportion(14, 41))
    assert unpaired.interval is not None
    assert unpaired.interval.high - unpaired.interval.low > interval.high - interval.low


def test_paired_comparison_needs_the_same_attempts_in_both_arms() -> None:
    a = {"s1": True, "s2": True, "s3": False}
    assert paired_counts(a, {"s1": False, "s2": True, "s3": False}) == PairedCounts(
        both=1, only_a=1, only_b=0, neither=1
    )
    assert paired_counts(a, {"s1": True, "s2": True}) is None
    assert paired_counts({}, {}) is None
    difference = compare_paired(PairedCounts(both=1, only_a=9, only_b=0, neither=0))
    assert (difference.design, difference.test) == ("paired", "mcnemar-exact")
    assert difference.estimate == pytest.approx(0.9)
    assert difference.p_value == pytest.approx(2 / 2**9)
