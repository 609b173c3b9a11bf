"""Reading the pairs agreement is measured on: judge vs human, judge vs judge, human vs human.

- ``judge_human``: a human label (blind, or from an override) beside the judge's own
  answer (``AnswerRecord.judge_answer``) or verdict (``GradingRecord.judge_passed``);
  per human, grading and question only the latest label counts.
- ``judge_judge``: two graded gradings of the same submission by different judges: a
  regrade's grading beside the one it was measured against (its
  ``previous_grading_id``, as a regrade job's flip report pairs its items), so two
  shadow regrades of one grading are each paired with that grading, never with each
  other; a grading that no regrade made (no ``previous_grading_id``) beside the graded
  grading before it in time. A regrade by the same judge (only the rubric changed) is no
  pair.
- ``human_human``: two humans' labels on the same grading and question (the first two
  authors by id), on graded and unscored gradings; a question's dimension is the one of
  the rubric the grading reads with (:func:`api.reports.export_reads.rubric_for`, as its
  page shows it), so a question the judge did not answer (an unscored grading, an
  imported SREGym checklist that left it out) still pools into its dimension.

Gradings are filtered like the reports, superseded ones included: a label on an old
grading still measures the judge that graded it. The figures are computed in
:mod:`judge.agreement`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from sqlalchemy import select
from sqlmodel import col

from api.reports.export_reads import rubric_for, rubrics_in_scope
from api.reports.filters import ReportFilter, filtered
from judge.agreement import VERDICT, RatedPair
from judge.masking import mask_passwords
from judge.rubric import Rubric
from storage.database import Database
from storage.gradings import records_by_grading
from storage.review_tables import HumanLabelRecord
from storage.tables import AnswerRecord, GradingRecord, SubmissionRecord

__all__ = ["AGREEMENT_GROUPS", "AGREEMENT_KINDS", "AgreementKind", "AgreementQueries"]

AgreementKind = Literal["judge_human", "judge_judge", "human_human"]
AGREEMENT_KINDS: tuple[AgreementKind, ...] = ("judge_human", "judge_judge", "human_human")
#: what agreement can be grouped by
AGREEMENT_GROUPS = ("rubric", "judge", "provisional")
LabelSource = Literal["blind", "override", "all"]

_G, _S, _L, _A = GradingRecord, SubmissionRecord, HumanLabelRecord, AnswerRecord


def _group(grading: GradingRecord, group_by: Sequence[str], judge: str | None = None) -> Any:
    """The group of a pair; a judge's label (``judge``: the two judges of a judge-judge
    pair) with the credentials of its base URLs masked."""
    labels = {
        "rubric": f"{grading.rubric_id}@{grading.rubric_version}",
        "judge": mask_passwords(judge or f"{grading.judge_backend}:{grading.judge_model}"),
        "provisional": "provisional" if grading.provisional else "qualified",
    }
    return tuple(labels[name] for name in group_by)


class AgreementQueries:
    """The rated pairs of each kind of agreement."""

    def __init__(self, db: Database, *, current: Mapping[str, Rubric] | None = None) -> None:
        """Work through ``db``; ``current``: the rubric files' current versions by id
        (``RubricCatalog.current``), which a grading whose rubric version is not stored
        reads with (:func:`api.reports.export_reads.rubrics_in_scope`)."""
        self._db = db
        self._current: Mapping[str, Rubric] = current or {}

    async def pairs(
        self,
        filters: ReportFilter,
        kind: AgreementKind,
        *,
        group_by: Sequence[str] = (),
        source: LabelSource = "all",
    ) -> list[RatedPair]:
        """Pairs of one kind over the filtered graded gradings."""
        scope = replace(filters, current_only=False)
        if kind == "judge_judge":
            return await self._judge_pairs(scope, group_by)
        labels = await self._labels(scope, source, judged=kind == "judge_human")
        gradings = {g.id: g for g, _ in labels}
        answers = await self._judge_answers(list(gradings))
        if kind == "human_human":
            rubrics = await self._db.run_read(rubrics_in_scope, scope, self._current)
            dimensions = {
                g.id: _dimensions(rubric_for(rubrics, g, answers.get(g.id, {})), answers.get(g.id))
                for g in gradings.values()
            }
            return _human_pairs(labels, gradings, dimensions, group_by)
        pairs = []
        for grading, label in labels:
            group = _group(grading, group_by)
            if label.question_id is None and label.verdict is not None:
                if grading.judge_passed is not None:
                    human = label.verdict == "pass"
                    pairs.append(RatedPair(grading.judge_passed, human, VERDICT, None, group))
            elif label.answer is not None and label.question_id in answers.get(grading.id, {}):
                dim, judge = answers[grading.id][label.question_id]
                pairs.append(RatedPair(judge, label.answer, label.question_id, dim, group))
        return pairs

    async def _labels(
        self, scope: ReportFilter, source: LabelSource, *, judged: bool
    ) -> list[tuple[GradingRecord, HumanLabelRecord]]:
        """The latest label per human, grading and item, with its grading: a graded one
        when ``judged`` (measured against the judge), else an unscored one too (humans
        decide those, and two humans agree or not whatever the judge did)."""
        base: Any = (
            select(_G, _L)
            .select_from(_L)
            .join(_G, col(_G.id) == col(_L.grading_id))
            .join(_S, col(_S.id) == col(_G.submission_id))
        )
        statuses = ("graded",) if judged else ("graded", "unscored")
        query = filtered(base, scope).where(col(_G.status).in_(statuses))
        if source != "all":
            query = query.where(col(_L.source) == source)
        ordered = query.order_by(col(_L.id))
        rows = await self._db.run_read(
            lambda session: [(r[0], r[1]) for r in session.execute(ordered)]
        )
        # the latest of each source first: a retraction (a withdrawn override's, neither
        # answer nor verdict) ends its source's label, not the human's blind one
        by_source: dict[tuple[str, str, str, str], tuple[GradingRecord, HumanLabelRecord]] = {}
        for grading, label in rows:
            item = label.question_id or VERDICT
            by_source[(grading.id, label.author_id, item, label.source)] = (grading, label)
        latest: dict[tuple[str, str, str], tuple[GradingRecord, HumanLabelRecord]] = {}
        for (grading_id, author, item, _), pair in sorted(
            by_source.items(), key=lambda entry: entry[1][1].id or 0
        ):
            if not _retracted(pair[1]):
                latest[(grading_id, author, item)] = pair
        return list(latest.values())

    async def _judge_answers(self, ids: list[str]) -> dict[str, dict[str, tuple[str, bool]]]:
        """grading -> question -> (dimension, the judge's own answer)."""
        found: dict[str, dict[str, tuple[str, bool]]] = defaultdict(dict)
        order = (col(_A.grading_id), col(_A.position))
        stored = await self._db.run_read(records_by_grading, _A, ids, order=order)
        for answers in stored.values():
            for a in answers:
                found[a.grading_id][a.question_id] = (a.dimension_id, a.judge_answer)
        return found

    async def _judge_pairs(self, scope: ReportFilter, group_by: Sequence[str]) -> list[RatedPair]:
        """Each graded grading beside the one it was measured against, by another judge."""
        query = filtered(select(_G).join(_S, col(_S.id) == col(_G.submission_id)), scope).where(
            col(_G.status) == "graded"
        )
        gradings = await self._db.run_read(lambda session: list(session.execute(query).scalars()))
        couples = _measured_against(gradings)
        answers = await self._judge_answers([g.id for couple in couples for g in couple])
        pairs = []
        for old, new in couples:
            judges = (
                f"{old.judge_backend}:{old.judge_model} vs {new.judge_backend}:{new.judge_model}"
            )
            group = _group(new, group_by, judges)
            a, b = answers.get(old.id, {}), answers.get(new.id, {})
            for qid in sorted(set(a) & set(b)):
                pairs.append(RatedPair(a[qid][1], b[qid][1], qid, b[qid][0], group))
            if old.judge_passed is not None and new.judge_passed is not None:
                pairs.append(RatedPair(old.judge_passed, new.judge_passed, VERDICT, None, group))
        return pairs


def _measured_against(
    gradings: Sequence[GradingRecord],
) -> list[tuple[GradingRecord, GradingRecord]]:
    """(earlier, later) couples of graded gradings of one submission by different judges.

    A regrade's grading is paired with its ``previous_grading_id`` (when that grading is
    among ``gradings``: graded and in the filter), as a regrade job's flip report pairs
    its items; only a grading no regrade made is paired with the one before it in time.
    """
    by_id = {g.id: g for g in gradings}
    by_submission: dict[str, list[GradingRecord]] = defaultdict(list)
    for g in gradings:
        by_submission[g.submission_id].append(g)
    couples = []
    for members in by_submission.values():
        members.sort(key=lambda g: (g.created_at, g.id))
        for i, grading in enumerate(members):
            if grading.previous_grading_id is not None:
                before = by_id.get(grading.previous_grading_id)
            else:
                before = members[i - 1] if i else None
            if before is not None and _judge(before) != _judge(grading):
                couples.append((before, grading))
    return couples


def _judge(grading: GradingRecord) -> tuple[str, str]:
    return (grading.judge_backend, grading.judge_model)


def _dimensions(
    rubric: Rubric | None, answers: Mapping[str, tuple[str, bool]] | None
) -> dict[str, str]:
    """question -> dimension of one grading: its rubric's, else (no rubric it reads with)
    the dimensions its judge's answers were stored with."""
    if rubric is not None:
        return {q.id: d.id for d in rubric.dimensions for q in d.questions}
    return {qid: dim for qid, (dim, _) in (answers or {}).items()}


def _human_pairs(
    labels: list[tuple[GradingRecord, HumanLabelRecord]],
    gradings: dict[str, GradingRecord],
    dimensions: dict[str, dict[str, str]],
    group_by: Sequence[str],
) -> list[RatedPair]:
    """The first two humans' labels (by author id) on each grading and item;
    ``dimensions``: grading -> question -> dimension (:func:`_dimensions`)."""
    items: dict[tuple[str, str], dict[str, HumanLabelRecord]] = defaultdict(dict)
    for grading, label in labels:
        items[(grading.id, label.question_id or VERDICT)][label.author_id] = label
    pairs = []
    for (grading_id, item), by_author in sorted(items.items()):
        if len(by_author) < 2:
            continue
        first, second = (by_author[a] for a in sorted(by_author)[:2])
        group = _group(gradings[grading_id], group_by)
        if item == VERDICT:
            if first.verdict is not None and second.verdict is not None:
                a, b = first.verdict == "pass", second.verdict == "pass"
                pairs.append(RatedPair(a, b, VERDICT, None, group))
        elif first.answer is not None and second.answer is not None:
            dim = dimensions.get(grading_id, {}).get(item)
            pairs.append(RatedPair(first.answer, second.answer, item, dim, group))
    return pairs


def _retracted(label: HumanLabelRecord) -> bool:
    """Whether a label takes back the one before it (a withdrawn override)."""
    return label.answer is None and label.verdict is None
