"""Reading a regrade job's items beside the gradings they were measured against.

Each item pairs the previous grading (current when the job started) with the new one,
with the answers of both (the judge's own, and the effective ones: after the evidence
check, with the human overrides in force on that grading) and the human overrides in
force on the previous grading. The report built from these
(``api.regrade.flips``) holds no database code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, aliased
from sqlmodel import col

from judge.adjudication import overrides_in_force
from storage.database import Database
from storage.errors import NotFound
from storage.overrides import override_events
from storage.regrade.tables import RegradeJobRecord
from storage.review_tables import OverrideRecord
from storage.tables import AnswerRecord, GradingRecord, SubmissionRecord

__all__ = ["FlipItem", "GradingSide", "read_pairs"]

_CHUNK = 500


@dataclass(frozen=True)
class GradingSide:
    """One grading of a pair: its verdicts and the judge's answers by question."""

    id: str
    status: str
    passed: bool | None
    judge_passed: bool | None
    yes_count: int | None
    judge_answers: dict[str, bool] = field(default_factory=dict)
    #: the effective answers: after the evidence check, with the overrides in force applied
    answers: dict[str, bool] = field(default_factory=dict)
    #: a pass held for a human (no verdict in force until one decides it)
    held: bool = False


@dataclass(frozen=True)
class FlipItem:
    """A regrade item and the grading it is compared with."""

    submission_id: str
    agent: str | None
    model: str | None
    scenario_id: str | None
    old: GradingSide
    new: GradingSide
    #: human answer overrides in force on the previous grading: question -> yes/no
    human_answers: dict[str, bool] = field(default_factory=dict)
    #: a human verdict override in force on the previous grading: True pass, False fail
    human_verdict: bool | None = None


def _side(
    grading: GradingRecord,
    answers: dict[str, dict[str, tuple[bool, bool]]],
    overrides: Sequence[OverrideRecord],
) -> GradingSide:
    mine = answers.get(grading.id, {})
    effective = {qid: answer for qid, (answer, _) in mine.items()}
    effective.update(_human_answers(overrides))
    return GradingSide(
        id=grading.id,
        status=grading.status,
        passed=grading.passed,
        judge_passed=grading.judge_passed,
        yes_count=grading.yes_count,
        judge_answers={qid: judge for qid, (_, judge) in mine.items()},
        answers={qid: a for qid, a in effective.items() if qid in mine},
        held=grading.held,
    )


def _human_answers(overrides: Sequence[OverrideRecord]) -> dict[str, bool]:
    """question -> the human answer of each answer override in force."""
    in_force = overrides_in_force(override_events(list(overrides)))
    return {
        qid: event.answer
        for (kind, qid), event in in_force.items()
        if kind == "answer" and event.answer is not None
    }


async def read_pairs(db: Database, job_id: str) -> list[FlipItem]:
    """Every item of the job with its previous grading; NotFound for an unknown job."""
    new, old = aliased(GradingRecord), aliased(GradingRecord)
    query = (
        select(new, old, SubmissionRecord)
        .join(old, col(old.id) == col(new.previous_grading_id))
        .join(SubmissionRecord, col(SubmissionRecord.id) == col(new.submission_id))
        .where(col(new.regrade_job_id) == job_id)
        .order_by(col(SubmissionRecord.created_at), col(SubmissionRecord.id))
    )
    return await db.run_read(_pairs, job_id, query)


def _pairs(session: Session, job_id: str, query: Any) -> list[FlipItem]:
    if session.get(RegradeJobRecord, job_id) is None:
        raise NotFound(f"no regrade job {job_id!r}")
    rows = [(r[0], r[1], r[2]) for r in session.execute(query)]
    ids = [g.id for n, o, _ in rows for g in (n, o)]
    answers: dict[str, dict[str, tuple[bool, bool]]] = {}
    overrides: dict[str, list[OverrideRecord]] = {}
    for start in range(0, len(ids), _CHUNK):
        chunk = ids[start : start + _CHUNK]
        found = select(AnswerRecord).where(col(AnswerRecord.grading_id).in_(chunk))
        for a in session.execute(found).scalars():
            answers.setdefault(a.grading_id, {})[a.question_id] = (a.answer, a.judge_answer)
        human = select(OverrideRecord).where(col(OverrideRecord.grading_id).in_(chunk))
        for o in session.execute(human).scalars():
            overrides.setdefault(o.grading_id, []).append(o)
    return [_item(n, o, s, answers, overrides) for n, o, s in rows]


def _item(
    new: GradingRecord,
    old: GradingRecord,
    submission: SubmissionRecord,
    answers: dict[str, dict[str, tuple[bool, bool]]],
    overrides: dict[str, list[OverrideRecord]],
) -> FlipItem:
    previous = overrides.get(old.id, [])
    verdict = overrides_in_force(override_events(list(previous))).get(("verdict", ""))
    return FlipItem(
        submission_id=submission.id,
        agent=submission.agent,
        model=submission.model,
        scenario_id=submission.scenario_id,
        old=_side(old, answers, previous),
        new=_side(new, answers, overrides.get(new.id, [])),
        human_answers=_human_answers(previous),
        human_verdict=None if verdict is None else verdict.verdict == "pass",
    )
