"""The agreement report: judge vs human, judge vs judge, human vs human, as data and table.

Shared by ``GET /v1/stats/agreement`` and ``sre-judge report agreement``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from api.reports.agreement_queries import (
    AGREEMENT_KINDS,
    AgreementKind,
    AgreementQueries,
    LabelSource,
)
from api.reports.filters import ReportFilter
from api.tabular import Tabular
from judge.agreement import AgreementRow, agreement_report

if TYPE_CHECKING:
    from judge.rubric import Rubric
    from storage import Store

__all__ = [
    "DEFINITIONS",
    "AgreementReport",
    "KindAgreement",
    "agreement_table",
    "build_agreement_report",
]

NOTE = (
    "kappa: Cohen's, 95% CI from the large-sample standard error (Fleiss, Cohen, Everitt); "
    "undefined (with the reason) when a rater gave one label only; "
    "accuracy with its Wilson 95% interval; confusion counts are rater a -> rater b"
)
#: what each kind compares: always the judges' own answers and verdicts
DEFINITIONS: dict[str, str] = {
    "judge_human": (
        "the judge's own answers and verdicts (judge_answer, judge_passed: before evidence "
        "checks and overrides) against each human's latest label; current, superseded "
        "and shadow gradings"
    ),
    "judge_judge": (
        "the judges' own answers and verdicts of two graded gradings of one submission by "
        "different judges (current, superseded and shadow gradings): a regrade's grading "
        "beside the grading it was measured against (a grading no regrade made: beside "
        "the one before it), earlier -> later; a regrade job's flip report with "
        "verdicts=judge counts its items the same way; a regrade by the same judge "
        "(a new rubric only) is no pair"
    ),
    "human_human": (
        "the first two humans' labels (by author id) on one grading and item; graded and "
        "unscored gradings (humans decide those), current, superseded and shadow"
    ),
}
RATERS = {
    "judge_human": ("judge", "human"),
    "judge_judge": ("earlier judge", "later judge"),
    "human_human": ("first human", "second human"),
}


class KindAgreement(BaseModel):
    """The rows of one kind of agreement."""

    model_config = ConfigDict(frozen=True)

    kind: AgreementKind
    rater_a: str
    rater_b: str
    #: what is compared, in words (always the judges' own verdicts, never effective ones)
    definition: str = ""
    rows: list[AgreementRow]


class AgreementReport(BaseModel):
    """Agreement figures per kind, group, question, dimension and verdict."""

    model_config = ConfigDict(frozen=True)

    group_by: list[str]
    source: LabelSource
    kinds: list[KindAgreement]
    note: str = NOTE


async def build_agreement_report(
    store: Store,
    filters: ReportFilter,
    *,
    kinds: Sequence[AgreementKind] = AGREEMENT_KINDS,
    group_by: Sequence[str] = (),
    source: LabelSource = "all",
    current: Mapping[str, Rubric] | None = None,
) -> AgreementReport:
    """Read the pairs of each kind and compute their agreement; ``current``: the rubric
    files' current versions by id, which a grading whose rubric version is not stored
    reads with (:class:`AgreementQueries`)."""
    parts = []
    queries = AgreementQueries(store.db, current=current)
    for kind in kinds:
        pairs = await queries.pairs(filters, kind, group_by=group_by, source=source)
        a, b = RATERS[kind]
        rows = agreement_report(pairs, group_by=group_by)
        parts.append(
            KindAgreement(kind=kind, rater_a=a, rater_b=b, definition=DEFINITIONS[kind], rows=rows)
        )
    return AgreementReport(group_by=list(group_by), source=source, kinds=parts)


def agreement_table(report: AgreementReport) -> Tabular:
    """One row per kind, group, level and item; accuracy and kappa with their intervals."""
    columns = [
        "kind", *report.group_by, "level", "item", "n", "accuracy", "accuracy_ci_low",
        "accuracy_ci_high", "kappa", "kappa_se", "kappa_ci_low", "kappa_ci_high",
        "yes->yes", "yes->no", "no->yes", "no->no", "kappa_undefined",
    ]  # fmt: skip
    rows: list[list[Any]] = []
    for part in report.kinds:
        for row in part.rows:
            f = row.agreement
            # no items agreed on or not: no accuracy, and no interval of 0 to 1 either
            accuracy = f.accuracy_interval if f.accuracy is not None else None
            ci = f.kappa_interval
            rows.append([
                part.kind, *(row.group.get(k) for k in report.group_by), row.level, row.item,
                f.n, f.accuracy, accuracy.low if accuracy else None,
                accuracy.high if accuracy else None, f.kappa, f.kappa_se,
                ci.low if ci else None, ci.high if ci else None, *f.confusion.values(),
                f.kappa_undefined,
            ])  # fmt: skip
    notes = [report.note, *(f"{part.kind}: {part.definition}" for part in report.kinds)]
    return Tabular(title="Agreement", columns=columns, rows=rows, notes=notes)
