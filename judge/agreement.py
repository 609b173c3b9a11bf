"""Agreement of two raters on yes/no labels: accuracy, Cohen's kappa and its interval.

A rater is the judge, another judge, or a human adjudicator. Each comparison is a list
of :class:`RatedPair` (rater a's label, rater b's label, which question, which group);
:func:`agreement_report` turns them into figures per question, per dimension (the
answers of its questions pooled), over all answers, and on verdicts.

Kappa and its 95% interval come from statsmodels' ``cohens_kappa`` (Cohen 1960, with
the large-sample standard error of Fleiss, Cohen and Everitt 1969); accuracy carries
its Wilson interval. Kappa is None when undefined (both raters always gave one label).
No web and no database here.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict
from scipy import stats

from judge.statistics import CONFIDENCE, Interval, wilson_interval

__all__ = [
    "VERDICT",
    "Agreement",
    "AgreementRow",
    "RatedPair",
    "agreement",
    "agreement_report",
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
    #: counts keyed ``a->b``: ``yes->yes``, ``yes->no``, ``no->yes``, ``no->no``
    confusion: dict[str, int]


_CELLS = ((True, True), (True, False), (False, True), (False, False))


def _word(value: bool) -> str:
    return "yes" if value else "no"


def _finite(value: Any) -> float | None:
    number = float(value)
    return None if math.isnan(number) or math.isinf(number) else number


def _kappa(table: list[list[int]], n: int) -> tuple[float | None, float | None]:
    """Kappa and its standard error (None, None when undefined)."""
    yes_a, yes_b = sum(table[0]), table[0][0] + table[1][0]
    expected = (yes_a * yes_b + (n - yes_a) * (n - yes_b)) / (n * n) if n else 1.0
    if n == 0 or expected >= 1.0:
        return None, None
    import numpy as np
    from statsmodels.stats.inter_rater import cohens_kappa

    with np.errstate(all="ignore"):  # one rater constant: kappa 0, no standard error
        fitted = cohens_kappa(np.asarray(table, dtype=float))
    return _finite(fitted.kappa), _finite(fitted.std_kappa)


def agreement(pairs: Iterable[tuple[bool, bool]], *, confidence: float = CONFIDENCE) -> Agreement:
    """Accuracy, Cohen's kappa with its interval, and the confusion matrix of ``pairs``."""
    counts = Counter(pairs)
    n = sum(counts.values())
    table = [[counts[(a, b)] for b in (True, False)] for a in (True, False)]
    agreed = table[0][0] + table[1][1]
    kappa, se = _kappa(table, n)
    interval = None
    if kappa is not None and se is not None:
        z = float(stats.norm.ppf(0.5 + confidence / 2))
        interval = Interval(
            low=max(-1.0, kappa - z * se),
            high=min(1.0, kappa + z * se),
            confidence=confidence,
            method="fleiss-cohen-everitt",
        )
    return Agreement(
        n=n,
        agreed=agreed,
        accuracy=agreed / n if n else None,
        accuracy_interval=wilson_interval(agreed, n, confidence=confidence),
        kappa=kappa,
        kappa_se=se,
        kappa_interval=interval,
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
