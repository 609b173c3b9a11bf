"""Agreement of two raters on yes/no labels: accuracy, Cohen's kappa and its interval.

A rater is the judge, another judge, or a human adjudicator. Each comparison is a list
of :class:`RatedPair` (rater a's label, rater b's label, which question, which group);
:func:`agreement_report` turns them into figures per question, per dimension (the
answers of its questions pooled), over all answers, and on verdicts.

Kappa is Cohen's (1960), with the large-sample standard error of Fleiss, Cohen and
Everitt (1969) and the normal 95% interval built from it; accuracy carries its Wilson
interval. Kappa is None when undefined, with the reason in words: no pairs,
or a rater who gave one label only (then kappa is 0 whatever the other rater says, and
its standard error 0: a figure that measures nothing, so it is not given as 0).
No web and no database here.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from judge.statistics import CONFIDENCE, Interval, wilson_interval

__all__ = [
    "VERDICT",
    "Agreement",
    "AgreementRow",
    "Kappa",
    "RatedPair",
    "agreement",
    "agreement_report",
    "cohens_kappa",
]

#: the pseudo question id of a verdict pair (pass = True)
VERDICT = "verdict"


@dataclass(frozen=True)
class RatedPair:
    """Two raters' labels on one item: a question's answer or a verdict (pass = True)."""

    a: bool
    b: bool
    question_id: str
    dimension_id: str | None = None
    #: the labels of the group this pair belongs to (e.g. rubric, judge)
    group: tuple[str | None, ...] = ()


class Agreement(BaseModel):
    """How two raters agree on ``n`` items."""

    model_config = ConfigDict(frozen=True)

    n: int
    agreed: int
    accuracy: float | None
    accuracy_interval: Interval
    kappa: float | None
    kappa_se: float | None
    kappa_interval: Interval | None
    #: why kappa is None (e.g. "one category only: rater a always said yes"), else None
    kappa_undefined: str | None = None
    #: counts keyed ``a->b``: ``yes->yes``, ``yes->no``, ``no->yes``, ``no->no``
    confusion: dict[str, int]


_CELLS = ((True, True), (True, False), (False, True), (False, False))


def _word(value: bool) -> str:
    return "yes" if value else "no"


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa of two raters' yes/no labels and its large-sample standard error.

    Both are None when kappa is undefined, and ``undefined`` says why: no items, or a
    rater who gave one label only (one category only).
    """

    n: int
    kappa: float | None
    se: float | None
    undefined: str | None = None

    def bounds(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        """``kappa -/+ z * se`` (not clipped: statsmodels' figures), or None when undefined."""
        if self.kappa is None or self.se is None:
            return None
        from scipy import stats  # imported when a figure is computed: scipy takes ~0.5 s

        z = float(stats.norm.ppf(0.5 + confidence / 2))
        return self.kappa - z * self.se, self.kappa + z * self.se

    def shown_bounds(self, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        """:meth:`bounds` clipped to [-1, 1], kappa's range: the interval every report shows."""
        bounds = self.bounds(confidence)
        return None if bounds is None else (max(-1.0, bounds[0]), min(1.0, bounds[1]))


def _table(counts: Counter[tuple[bool, bool]]) -> list[list[int]]:
    """The 2x2 table: rows rater a yes/no, columns rater b yes/no."""
    return [[counts[(a, b)] for b in (True, False)] for a in (True, False)]


def _undefined(table: list[list[int]]) -> str | None:
    """Why kappa of ``table`` is undefined, or None when it is defined."""
    n = sum(map(sum, table))
    if n == 0:
        return "no pairs"
    yes_a, yes_b = sum(table[0]), table[0][0] + table[1][0]
    constant = [
        f"rater {name} always said {'yes' if yes == n else 'no'}"
        for name, yes in (("a", yes_a), ("b", yes_b))
        if yes in (0, n)
    ]
    if constant:
        return f"one category only: {' and '.join(constant)}"
    return None


def _kappa_and_variance(table: Sequence[Sequence[int]]) -> tuple[float, float]:
    """Cohen's kappa of a square table of counts and its large-sample variance.

    Rows are rater a's categories, columns rater b's, in the same order. With ``p_ij``
    the share of items in cell ``(i, j)``, ``r_i`` and ``c_i`` the row and column shares,
    ``p_o`` the diagonal's share and ``p_e = sum_i r_i c_i`` the agreement by chance::

        kappa = (p_o - p_e) / (1 - p_e)
        var   = (A + B - C) / ((1 - p_e)^2 n)
        A = sum_i p_ii (1 - (r_i + c_i)(1 - kappa))^2
        B = (1 - kappa)^2 sum_{i != j} p_ij (c_i + r_j)^2
        C = (kappa - p_e (1 - kappa))^2

    This is the variance of Fleiss, Cohen and Everitt (1969) around the estimated kappa,
    which statsmodels' ``cohens_kappa`` reports as ``var_kappa`` and builds its interval
    from (their variance under kappa = 0 serves only the test of kappa = 0). Needs
    ``p_e < 1``: each rater used at least two categories.
    """
    n = sum(map(sum, table))
    categories = range(len(table))
    shares = [[count / n for count in row] for row in table]
    rows = [sum(row) / n for row in table]
    columns = [sum(row[j] for row in table) / n for j in categories]
    observed = sum(table[i][i] for i in categories) / n
    chance = sum(rows[i] * columns[i] for i in categories)
    kappa = (observed - chance) / (1 - chance)
    diagonal = sum(
        shares[i][i] * (1 - (rows[i] + columns[i]) * (1 - kappa)) ** 2 for i in categories
    )
    off_diagonal = (1 - kappa) ** 2 * sum(
        shares[i][j] * (columns[i] + rows[j]) ** 2 for i in categories for j in categories if i != j
    )
    correction = (kappa - chance * (1 - kappa)) ** 2
    variance = (diagonal + off_diagonal - correction) / (1 - chance) ** 2 / n
    return kappa, variance


def _kappa(table: list[list[int]]) -> Kappa:
    n = sum(map(sum, table))
    undefined = _undefined(table)
    if undefined is not None:
        return Kappa(n=n, kappa=None, se=None, undefined=undefined)
    kappa, variance = _kappa_and_variance(table)
    # a variance that rounding made negative gives no standard error and no interval
    se = math.sqrt(variance) if variance >= 0 else None
    return Kappa(n=n, kappa=kappa, se=se)


def cohens_kappa(pairs: Iterable[tuple[bool, bool]]) -> Kappa:
    """Cohen's kappa of (rater a, rater b) yes/no pairs, with its standard error."""
    return _kappa(_table(Counter(pairs)))


def agreement(pairs: Iterable[tuple[bool, bool]], *, confidence: float = CONFIDENCE) -> Agreement:
    """Accuracy, Cohen's kappa with its interval, and the confusion matrix of ``pairs``."""
    counts = Counter(pairs)
    n = sum(counts.values())
    table = _table(counts)
    agreed = table[0][0] + table[1][1]
    fit = _kappa(table)
    bounds = fit.shown_bounds(confidence)
    interval = None
    if bounds is not None:
        interval = Interval(
            low=bounds[0],
            high=bounds[1],
            confidence=confidence,
            method="fleiss-cohen-everitt",
        )
    return Agreement(
        n=n,
        agreed=agreed,
        accuracy=agreed / n if n else None,
        accuracy_interval=wilson_interval(agreed, n, confidence=confidence),
        kappa=fit.kappa,
        kappa_se=fit.se,
        kappa_interval=interval,
        kappa_undefined=fit.undefined,
        confusion={f"{_word(a)}->{_word(b)}": counts[(a, b)] for a, b in _CELLS},
    )


class AgreementRow(BaseModel):
    """Agreement on one question, one dimension, all answers, or the verdict, in a group."""

    model_config = ConfigDict(frozen=True)

    group: dict[str, str | None]
    #: ``question``, ``dimension``, ``answers`` (every question pooled) or ``verdict``
    level: str
    #: the question or dimension id, ``all`` or ``verdict``
    item: str
    agreement: Agreement


def agreement_report(
    pairs: Sequence[RatedPair], *, group_by: Sequence[str] = ()
) -> list[AgreementRow]:
    """Rows per group: each question, each dimension, all answers, then the verdict."""
    groups: dict[tuple[str | None, ...], list[RatedPair]] = defaultdict(list)
    for pair in pairs:
        groups[pair.group].append(pair)
    rows: list[AgreementRow] = []
    for key in sorted(groups, key=lambda k: tuple("" if v is None else v for v in k)):
        members = groups[key]
        group = dict(zip(group_by, key, strict=False))
        answers = [p for p in members if p.question_id != VERDICT]
        buckets: list[tuple[str, str, list[RatedPair]]] = []
        for qid in sorted({p.question_id for p in answers}):
            buckets.append(("question", qid, [p for p in answers if p.question_id == qid]))
        for dim in sorted({p.dimension_id for p in answers if p.dimension_id}):
            buckets.append(("dimension", dim, [p for p in answers if p.dimension_id == dim]))
        if answers:
            buckets.append(("answers", "all", answers))
        verdicts = [p for p in members if p.question_id == VERDICT]
        if verdicts:
            buckets.append(("verdict", VERDICT, verdicts))
        for level, item, chosen in buckets:
            figures = agreement((p.a, p.b) for p in chosen)
            rows.append(AgreementRow(group=group, level=level, item=item, agreement=figures))
    return rows
