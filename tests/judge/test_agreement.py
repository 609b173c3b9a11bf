"""Agreement figures against textbook values."""

from __future__ import annotations

import math

import pytest

from judge.agreement import (
    VERDICT,
    RatedPair,
    _kappa_and_variance,
    agreement,
    agreement_report,
    cohens_kappa,
)


def _pairs(yy: int, yn: int, ny: int, nn: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * yy + [(True, False)] * yn + [(False, True)] * ny + [(False, False)] * nn


def _fleiss_cohen_everitt_se(table: list[list[int]]) -> float:
    """The large-sample standard error of kappa (Fleiss, Cohen, Everitt 1969), by hand."""
    n = sum(map(sum, table))
    p = [[c / n for c in row] for row in table]
    rows = [sum(r) for r in p]
    cols = [p[0][j] + p[1][j] for j in range(2)]
    po = p[0][0] + p[1][1]
    pe = rows[0] * cols[0] + rows[1] * cols[1]
    k = (po - pe) / (1 - pe)
    diagonal = sum(p[i][i] * (1 - (rows[i] + cols[i]) * (1 - k)) ** 2 for i in range(2))
    off = (
        sum(p[i][j] * (cols[i] + rows[j]) ** 2 for i in range(2) for j in range(2) if i != j)
        * (1 - k) ** 2
    )
    return math.sqrt((diagonal + off - (k - pe * (1 - k)) ** 2) / (n * (1 - pe) ** 2))


@pytest.mark.parametrize(
    ("cells", "kappa"),
    [
        # Wikipedia, "Cohen's kappa", worked examples
        ((20, 5, 10, 15), 0.4),
        ((45, 15, 25, 15), 0.1304),
        ((25, 35, 5, 35), 0.2593),
    ],
)
def test_kappa_matches_the_textbook_examples(
    cells: tuple[int, int, int, int], kappa: float
) -> None:
    figures = agreement(_pairs(*cells))
    yy, yn, ny, nn = cells
    assert figures.kappa == pytest.approx(kappa, abs=5e-5)
    se = _fleiss_cohen_everitt_se([[yy, yn], [ny, nn]])
    assert figures.kappa_se == pytest.approx(se, rel=1e-9)
    assert figures.kappa_interval is not None
    assert figures.kappa_interval.low == pytest.approx(kappa - 1.959964 * se, abs=5e-5)
    assert figures.confusion == {"yes->yes": yy, "yes->no": yn, "no->yes": ny, "no->no": nn}


def test_the_first_example_in_full() -> None:
    figures = agreement(_pairs(20, 5, 10, 15))
    assert (figures.n, figures.agreed, figures.accuracy) == (50, 35, 0.7)
    assert figures.kappa_se == pytest.approx(0.12700, abs=5e-6)
    assert figures.kappa_interval is not None
    assert figures.kappa_interval.low == pytest.approx(0.1511, abs=5e-5)
    assert figures.kappa_interval.high == pytest.approx(0.6489, abs=5e-5)
    # Wilson interval of 35/50
    assert figures.accuracy_interval.low == pytest.approx(0.5625, abs=5e-5)
    assert figures.accuracy_interval.high == pytest.approx(0.8090, abs=5e-5)


def test_kappa_is_undefined_when_both_raters_never_vary() -> None:
    figures = agreement(_pairs(7, 0, 0, 0))
    assert figures.accuracy == 1.0 and figures.kappa is None and figures.kappa_interval is None
    assert figures.kappa_undefined == (
        "one category only: rater a always said yes and rater b always said yes"
    )
    empty = agreement([])
    assert empty.n == 0 and empty.accuracy is None and empty.kappa is None
    assert empty.kappa_undefined == "no pairs"


def test_one_constant_rater_leaves_kappa_undefined_never_zero() -> None:
    """Kappa would be 0 with standard error 0 ("CI 0.000-0.000"): it measures nothing."""
    figures = agreement(_pairs(6, 0, 4, 0))  # rater a: 6 yes and 4 no; rater b: always yes
    assert figures.kappa is None and figures.kappa_se is None and figures.kappa_interval is None
    assert figures.kappa_undefined == "one category only: rater b always said yes"
    assert figures.accuracy == pytest.approx(0.6)


def test_report_rows_per_question_dimension_answers_and_verdict() -> None:
    pairs = [
        RatedPair(True, True, "D1-Q1", "D1", ("r@1",)),
        RatedPair(True, False, "D1-Q2", "D1", ("r@1",)),
        RatedPair(False, False, "D2-Q1", "D2", ("r@1",)),
        RatedPair(True, True, VERDICT, None, ("r@1",)),
        RatedPair(False, False, "D1-Q1", "D1", ("r@2",)),
    ]
    rows = agreement_report(pairs, group_by=["rubric"])
    first = [(r.level, r.item, r.agreement.n) for r in rows if r.group == {"rubric": "r@1"}]
    assert first == [
        ("question", "D1-Q1", 1),
        ("question", "D1-Q2", 1),
        ("question", "D2-Q1", 1),
        ("dimension", "D1", 2),
        ("dimension", "D2", 1),
        ("answers", "all", 3),
        ("verdict", "verdict", 1),
    ]
    d1 = next(r for r in rows if r.item == "D1" and r.group == {"rubric": "r@1"})
    assert d1.agreement.accuracy == 0.5
    assert [r.group for r in rows][-1] == {"rubric": "r@2"}


# Figures of statsmodels 0.14 (``statsmodels.stats.inter_rater.cohens_kappa``: kappa,
# std_kappa, kappa_low, kappa_upp; rounded to 1e-12), which computed kappa here before.
# Cells: yes->yes, yes->no, no->yes, no->no.
STATSMODELS_KAPPA = [
    ((20, 5, 10, 15), 0.4, 0.126996062931, 0.151092290477, 0.648907709523),
    ((45, 15, 25, 15), 0.130434782609, 0.098661537623, -0.062938277793, 0.32380784301),
    ((25, 35, 5, 35), 0.259259259259, 0.077159731744, 0.108028963983, 0.410489554535),
    ((50, 0, 0, 50), 1.0, 0.0, 1.0, 1.0),
    ((3, 0, 0, 2), 1.0, 0.0, 1.0, 1.0),
    ((1, 0, 0, 1), 1.0, 0.0, 1.0, 1.0),
    ((0, 4, 4, 0), -1.0, 0.0, -1.0, -1.0),
    ((0, 1, 1, 0), -1.0, 0.0, -1.0, -1.0),
    ((2, 8, 7, 3), -0.5, 0.19267848868, -0.877642898408, -0.122357101592),
    ((1, 1, 0, 1), 0.4, 0.391918358845, -0.368145868217, 1.168145868217),
    ((1, 0, 2, 97), 0.492385786802, 0.306146768385, -0.107650853215, 1.09242242682),
    ((90, 5, 3, 2), 0.29203539823, 0.181791001403, -0.064268417234, 0.648339213694),
    ((10, 0, 3, 7), 0.7, 0.152331874537, 0.40143501221, 0.99856498779),
    ((0, 5, 5, 5), -0.5, 0.136930639376, -0.768379121558, -0.231620878442),
    ((400, 37, 52, 311), 0.774791872264, 0.022481265645, 0.730729401274, 0.818854343254),
    ((1, 2, 3, 4), -0.086956521739, 0.301866151657, -0.678603307139, 0.504690263661),
    ((5, 5, 5, 5), 0.0, 0.22360679775, -0.438261270288, 0.438261270288),
]


@pytest.mark.parametrize(("cells", "kappa", "se", "low", "high"), STATSMODELS_KAPPA)
def test_kappa_its_standard_error_and_interval_are_statsmodels_figures(
    cells: tuple[int, int, int, int], kappa: float, se: float, low: float, high: float
) -> None:
    """Balanced, unbalanced, perfect (dis)agreement and n = 2 tables, to 1e-9."""
    fit = cohens_kappa(_pairs(*cells))
    assert fit.kappa == pytest.approx(kappa, abs=1e-9)
    assert fit.se == pytest.approx(se, abs=1e-9)  # 0.0, not None, for perfect agreement
    assert fit.bounds() == pytest.approx((low, high), abs=1e-9)
    figures = agreement(_pairs(*cells))
    assert (figures.kappa, figures.kappa_se) == (fit.kappa, fit.se)
    assert figures.kappa_interval is not None
    assert figures.kappa_interval.low == pytest.approx(max(-1.0, low), abs=1e-9)
    assert figures.kappa_interval.high == pytest.approx(min(1.0, high), abs=1e-9)


@pytest.mark.parametrize(
    ("cells", "undefined"),
    [
        # statsmodels raised AssertionError on the empty table
        ((0, 0, 0, 0), "no pairs"),
        # statsmodels gave kappa nan
        ((1, 0, 0, 0), "one category only: rater a always said yes and rater b always said yes"),
        ((7, 0, 0, 0), "one category only: rater a always said yes and rater b always said yes"),
        ((0, 0, 0, 5), "one category only: rater a always said no and rater b always said no"),
        # statsmodels gave kappa 0 with standard error 0, about 6e-9, or nan
        ((0, 1, 0, 0), "one category only: rater a always said yes and rater b always said no"),
        ((0, 0, 1, 0), "one category only: rater a always said no and rater b always said yes"),
        ((6, 0, 4, 0), "one category only: rater b always said yes"),
        ((6, 4, 0, 0), "one category only: rater a always said yes"),
        ((0, 0, 3, 2), "one category only: rater a always said no"),
    ],
)
def test_degenerate_tables_leave_kappa_undefined_with_the_reason(
    cells: tuple[int, int, int, int], undefined: str
) -> None:
    """Empty tables, n = 1 and a rater with one label: no kappa, no error, no interval."""
    fit = cohens_kappa(_pairs(*cells))
    assert (fit.kappa, fit.se, fit.undefined, fit.bounds()) == (None, None, undefined, None)
    figures = agreement(_pairs(*cells))
    assert (figures.kappa, figures.kappa_se, figures.kappa_interval) == (None, None, None)
    assert figures.kappa_undefined == undefined


@pytest.mark.parametrize(
    ("table", "kappa", "se"),
    [
        ([[15, 3, 2], [4, 20, 6], [1, 5, 24]], 0.6000000000000001, 0.07521156856063747),
        # a category neither rater used: the 2x2 table's figures
        ([[5, 1, 0], [2, 6, 0], [0, 0, 0]], 0.5714285714285714, 0.2170788392884698),
        (
            [[10, 2, 1, 0], [3, 8, 2, 1], [0, 1, 12, 3], [1, 0, 2, 9]],
            0.6107916850950906,
            0.08165222295760349,
        ),
        ([[4, 0, 0], [0, 3, 0], [0, 0, 5]], 1.0, 0.0),
        ([[0, 3, 1], [2, 0, 4], [1, 2, 0]], -0.5089285714285715, 0.060712895633417405),
        # rater b never used the third category
        ([[3, 2, 0], [1, 4, 0], [2, 1, 0]], 0.24999999999999992, 0.18934008334149247),
        (
            [
                [2, 1, 0, 0, 1],
                [0, 3, 1, 0, 0],
                [1, 0, 4, 1, 0],
                [0, 0, 1, 2, 1],
                [0, 1, 0, 0, 3],
            ],
            0.5416666666666666,
            0.1282050760383174,
        ),
    ],
)
def test_the_formula_gives_statsmodels_figures_on_larger_tables(
    table: list[list[int]], kappa: float, se: float
) -> None:
    """The formula is written for any number of categories; reports use two."""
    fitted_kappa, variance = _kappa_and_variance(table)
    assert fitted_kappa == pytest.approx(kappa, abs=1e-9)
    assert math.sqrt(variance) == pytest.approx(se, abs=1e-9)
