"""Counts behind the reports: outcomes, answers per question, failing dimensions, tags.

Each method is one read transaction; on PostgreSQL it runs at REPEATABLE READ so that
its several statements see one snapshot (SQLite's read transaction already does).
Counting happens in SQL, grouped by the requested keys.

Effective answers are the stored answers with the human overrides in force applied
(issue 4 keeps overrides as rows beside the judge's answers). Gradings without an
override in force are counted in SQL; the few with one are fetched and corrected in
Python with :mod:`judge.adjudication`, the same logic the grading object uses.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import distinct, false, func, true
from sqlalchemy.orm import Session
from sqlmodel import col

from api.reports.effective import EffectiveGrading, overridden_gradings
from api.reports.filter_scope import is_inline
from api.reports.filters import (
    GroupKey,
    ReportFilter,
    Verdicts,
    answer_column,
    count_where,
    failing_dimensions_query,
    filtered,
    group_columns,
    group_key,
    joined,
    scored_answers,
    verdict_column,
)
from storage.database import Database
from storage.review_tables import FailureTagRecord
from storage.tables import AnswerRecord, GradingRecord

__all__ = [
    "ArmReading",
    "DimensionFailures",
    "OutcomeCounts",
    "QuestionCounts",
    "ReportQueries",
    "TagCounts",
]

Key = tuple[str | None, ...]
_G, _A = GradingRecord, AnswerRecord


@dataclass(frozen=True)
class OutcomeCounts:
    """Gradings of one group by outcome; unscored, pending and held are not failures."""

    key: Key
    passed: int
    failed: int
    unscored: int
    pending: int
    #: passes held for a human (injection markers): neither passed nor failed yet
    held: int = 0
    #: of all the above, gradings by a judge not yet qualified (any outcome)
    provisional: int = 0
    #: gradings against their submitters' own ground truths, counted apart (in none of
    #: the above) when the filter says ``inline="apart"``
    inline: int = 0


@dataclass(frozen=True)
class ArmReading:
    """One arm of a comparison: its outcomes per scenario, and the verdict of each of its
    passed or failed gradings by submission (the attempts it graded, to pair arms on)."""

    per_scenario: list[OutcomeCounts]
    #: submission id -> the verdicts of the arm's gradings of it counted in ``n``
    #: (one, unless the arm takes several gradings of one submission)
    verdicts: dict[str, list[bool]]


@dataclass(frozen=True)
class QuestionCounts:
    """Yes answers to one question among ``n`` answered ones, in one group."""

    key: Key
    question_id: str
    dimension_id: str
    position: int
    yes: int
    n: int


@dataclass(frozen=True)
class DimensionFailures:
    """Of ``failing`` failed diagnoses: how often this dimension had no yes, or fewest."""

    key: Key
    dimension_id: str
    failing: int
    #: the dimension had no yes at all (the rule's per-dimension veto)
    zero_yes: int
    #: the dimension had the lowest share of yes (ties count for each)
    weakest: int


@dataclass(frozen=True)
class TagCounts:
    """Gradings carrying one failure tag, out of ``n`` scored gradings of the group."""

    key: Key
    tag: str
    tagged: int
    n: int


class ReportQueries:
    """Aggregates over stored gradings for pass rates, comparisons and breakdowns."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def outcome_counts(
        self,
        filters: ReportFilter,
        *,
        group_by: Sequence[GroupKey] = (),
        verdicts: Verdicts = "effective",
    ) -> list[OutcomeCounts]:
        """Passed, failed, unscored and pending gradings per group."""
        return await self._db.run_read(_outcomes, filters, group_by, verdicts)

    async def arm_readings(
        self, a: ReportFilter, b: ReportFilter, *, verdicts: Verdicts = "effective"
    ) -> tuple[ArmReading, ArmReading]:
        """Outcomes of two arms per scenario and their verdicts per attempt, from one
        snapshot."""

        def read(session: Session) -> tuple[ArmReading, ArmReading]:
            a_reading = ArmReading(
                _outcomes(session, a, ("scenario",), verdicts),
                _verdicts_by_submission(session, a, verdicts),
            )
            b_reading = ArmReading(
                _outcomes(session, b, ("scenario",), verdicts),
                _verdicts_by_submission(session, b, verdicts),
            )
            return a_reading, b_reading

        return await self._db.run_read(read)

    async def question_counts(
        self,
        filters: ReportFilter,
        *,
        group_by: Sequence[GroupKey] = (),
        verdicts: Verdicts = "effective",
    ) -> list[QuestionCounts]:
        """Yes answers per question and group, ordered by group and rubric position."""
        answer = answer_column(verdicts)
        groups = group_columns(group_by)
        query = scored_answers(
            joined(
                *groups,
                col(_A.question_id),
                col(_A.dimension_id),
                func.min(col(_A.position)).label("position"),
                func.count().label("n"),
                count_where(answer.is_(True)).label("yes"),
                from_answers=True,
            ),
            filters,
            verdicts,
        ).group_by(*groups, col(_A.question_id), col(_A.dimension_id))
        totals: dict[tuple[Key, str, str], list[int]] = {}

        def read(session: Session) -> None:
            for row in session.execute(query):
                item = (group_key(row, group_by), row.question_id, row.dimension_id)
                totals[item] = [row.position, int(row.yes), int(row.n)]
            if verdicts == "effective":
                for grading in overridden_gradings(session, filters, group_by):
                    _add_answers(totals, grading)

        await self._db.run_read(read)
        counts = [
            QuestionCounts(key=k, question_id=q, dimension_id=d, position=p, yes=y, n=n)
            for (k, q, d), (p, y, n) in totals.items()
        ]
        return sorted(counts, key=lambda c: (_sortable(c.key), c.position, c.question_id))

    async def dimension_failures(
        self,
        filters: ReportFilter,
        *,
        group_by: Sequence[GroupKey] = (),
        verdicts: Verdicts = "effective",
    ) -> list[DimensionFailures]:
        """For failed diagnoses: per dimension, how often it had no yes or the fewest."""
        query = failing_dimensions_query(filters, group_by, verdicts)
        totals: dict[tuple[Key, str], list[int]] = {}

        def read(session: Session) -> None:
            for row in session.execute(query):
                totals[(group_key(row, group_by), row.dim)] = [
                    int(row.failing),
                    int(row.zero_yes),
                    int(row.weakest),
                ]
            if verdicts == "effective":
                for grading in overridden_gradings(session, filters, group_by):
                    if grading.passed is False and grading.answers:
                        _add_failing(totals, grading)

        await self._db.run_read(read)
        failures = [
            DimensionFailures(key=k, dimension_id=d, failing=f, zero_yes=z, weakest=w)
            for (k, d), (f, z, w) in totals.items()
        ]
        return sorted(failures, key=lambda x: (_sortable(x.key), x.dimension_id))

    async def failure_tag_counts(
        self, filters: ReportFilter, *, group_by: Sequence[GroupKey] = ()
    ) -> list[TagCounts]:
        """Gradings carrying each failure tag in force, per group, most frequent first, of
        the gradings that are not pending (``n``): unscored ones count, as a human may tag
        a grading the judge could not score."""
        groups = group_columns(group_by)
        scored = col(_G.status) != "pending"
        tag = FailureTagRecord
        tagged = (
            filtered(
                joined(
                    *groups,
                    col(tag.tag),
                    func.count(distinct(col(tag.grading_id))).label("tagged"),
                ).join(tag, col(tag.grading_id) == col(_G.id)),
                filters,
            )
            .where(scored, col(tag.removed_at).is_(None))
            .group_by(*groups, col(tag.tag))
        )
        sizes = filtered(joined(*groups, func.count().label("n")), filters).where(scored)

        def read(session: Session) -> tuple[dict[Key, int], list[Any]]:
            n_of = {
                group_key(row, group_by): int(row.n)
                for row in session.execute(sizes.group_by(*groups))
            }
            return n_of, list(session.execute(tagged))

        n_of, rows = await self._db.run_read(read)
        counts = [
            TagCounts(key=k, tag=row.tag, tagged=int(row.tagged), n=n_of.get(k, 0))
            for row in rows
            for k in [group_key(row, group_by)]
        ]
        return sorted(counts, key=lambda c: (_sortable(c.key), -c.tagged, c.tag))


def _outcomes(
    session: Session, filters: ReportFilter, group_by: Sequence[GroupKey], verdicts: Verdicts
) -> list[OutcomeCounts]:
    verdict = verdict_column(verdicts)
    pending = col(_G.status) == "pending"
    # held passes count apart in effective verdicts; the judge's own verdict is never held
    held = col(_G.held).is_(True) if verdicts == "effective" else false()
    # inline gradings counted apart: in their own column and in no other
    apart = filters.inline == "apart"
    inline = is_inline() if apart else false()
    counted = ~inline if apart else true()
    groups = group_columns(group_by)
    query = filtered(
        joined(
            *groups,
            count_where(counted, verdict.is_(True)).label("passed"),
            count_where(counted, verdict.is_(False)).label("failed"),
            count_where(counted, verdict.is_(None), ~pending, ~held).label("unscored"),
            count_where(counted, verdict.is_(None), pending).label("pending"),
            count_where(counted, held).label("held"),
            count_where(counted, col(_G.provisional).is_(True)).label("provisional"),
            count_where(inline).label("inline"),
        ),
        replace(filters, inline="include") if apart else filters,
    ).group_by(*groups)
    counts = [
        OutcomeCounts(
            key=group_key(row, group_by),
            passed=int(row.passed),
            failed=int(row.failed),
            unscored=int(row.unscored),
            pending=int(row.pending),
            held=int(row.held),
            provisional=int(row.provisional),
            inline=int(row.inline),
        )
        for row in session.execute(query)
        if row.passed or row.failed or row.unscored or row.pending or row.held or row.inline
    ]
    return sorted(counts, key=lambda c: _sortable(c.key))


def _verdicts_by_submission(
    session: Session, filters: ReportFilter, verdicts: Verdicts
) -> dict[str, list[bool]]:
    """The verdicts that :func:`_outcomes` counts as passed or failed, by submission."""
    verdict = verdict_column(verdicts)
    query = filtered(joined(col(_G.submission_id), verdict.label("passed")), filters).where(
        verdict.is_not(None)
    )  # inline gradings counted apart are left out here by the filter itself
    found: dict[str, list[bool]] = defaultdict(list)
    for row in session.execute(query):
        found[str(row.submission_id)].append(bool(row.passed))
    return dict(found)


def _add_answers(totals: dict[tuple[Key, str, str], list[int]], grading: EffectiveGrading) -> None:
    """Add one overridden grading's effective answers to per-question totals."""
    for answer in grading.answers:
        entry = totals.setdefault(
            (grading.key, answer.question_id, answer.dimension_id), [answer.position, 0, 0]
        )
        entry[0] = min(entry[0], answer.position)
        entry[1] += int(answer.yes)
        entry[2] += 1


def _add_failing(totals: dict[tuple[Key, str], list[int]], grading: EffectiveGrading) -> None:
    """Add one failed overridden grading to per-dimension failure totals."""
    yes: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for answer in grading.answers:
        yes[answer.dimension_id] += int(answer.yes)
        total[answer.dimension_id] += 1
    lowest = min(yes[d] / total[d] for d in total)
    for dimension in total:
        entry = totals.setdefault((grading.key, dimension), [0, 0, 0])
        entry[0] += 1
        entry[1] += int(yes[dimension] == 0)
        entry[2] += int(yes[dimension] / total[dimension] == lowest)


def _sortable(key: Key) -> tuple[tuple[bool, str], ...]:
    """A sort key for group keys with None last."""
    return tuple((part is None, part or "") for part in key)
