"""Agreement figures against textbook values."""

from __future__ import annotations

import math

import pytest

from judge.agreement import VERDICT, RatedPair, agreement, agreement_report


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
