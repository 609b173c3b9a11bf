"""Human decisions stay final: carrying overrides onto the gradings of a regrade.

An answer override in force on the previous grading is copied onto the new grading
when the question's text is the same in both rubric versions; a verdict override when
the pass rule is the same. An imported SREGym verdict, whose version no stored rubric
is, is read with its rubric's current version, as its page shows it to the human.
Whatever cannot be carried sends the new grading to the review queue with reason
``override_outdated``. The copies are new override rows that keep the human author and
say where they came from; withdrawing the original withdraws the copies still in force
(:func:`copies_in_force` finds them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.adjudication import OverrideEvent, overrides_in_force
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric, rubric_from_mapping
from storage.catalog import rubric_key
from storage.overrides import apply_in_force, override_events
from storage.review_tables import OverrideRecord
from storage.tables import AnswerRecord, GradingRecord, RubricVersionRecord

__all__ = ["Carried", "carried_source", "carry_overrides", "copies_in_force"]

#: the reason a copy is given: ``carried by regrade job J from override O: <reason>``
_COPIED = re.compile(r"carried by regrade job \S+ from override (\w+): ")


@dataclass
class Carried:
    """What happened to the previous grading's overrides."""

    carried: list[str] = field(default_factory=list)
    outdated: list[str] = field(default_factory=list)
    #: the new override rows (copies), for the audit event that covers them
    copies: list[OverrideRecord] = field(default_factory=list)
    #: a human verdict could not be carried: the new grading must not replace the old
    verdict_outdated: bool = False

    def payload(self, previous_id: str) -> dict[str, Any]:
        """The audit payload: the overrides of ``previous_id`` carried (``carried``) and
        not (``outdated``), and the ids of their copies on the new grading (``copies``)."""
        return {
            "from_grading": previous_id,
            "carried": self.carried,
            "copies": [copy.id for copy in self.copies],
            "outdated": self.outdated,
        }


def _rubric(session: Session, grading: GradingRecord) -> Rubric | None:
    record = session.get(RubricVersionRecord, rubric_key(grading.rubric_id, grading.rubric_version))
    if record is None:
        return None
    return rubric_from_mapping(record.content, source=f"stored rubric {record.key}")


def _rubric_read(session: Session, grading: GradingRecord, current: Rubric | None) -> Rubric | None:
    """The rubric the previous grading reads with, as its page shows it and a human
    decided it (``api.service.presenters.rubric_shown``): its stored version; for one no
    stored version names (SREGym's imported verdicts, version ``sregym``), ``current``,
    the current version of the same rubric, when it asks every question the grading
    answered (all, some where SREGym's checklist left questions out, none where SREGym's
    judge could not grade the attempt). Never the regrade's own version: a regrade with
    another wording would find every question the same by construction."""
    stored = _rubric(session, grading)
    if stored is not None or current is None or current.id != grading.rubric_id:
        return stored
    query = select(col(AnswerRecord.question_id)).where(col(AnswerRecord.grading_id) == grading.id)
    asked = set(session.execute(query).scalars())
    return current if asked <= {q.id for q in current.questions} else None


def _same_question(old: Rubric | None, new: Rubric | None, question_id: str) -> bool:
    if old is None or new is None:
        return False
    try:
        return old.question(question_id).text == new.question(question_id).text
    except KeyError:
        return False


def _carries(event: OverrideEvent, old: Rubric | None, new: Rubric | None, graded: bool) -> bool:
    if event.kind == "answer":
        return graded and _same_question(old, new, event.question_id or "")
    return old is not None and new is not None and old.rule == new.rule


def carried_source(copy: OverrideRecord) -> str | None:
    """The id of the override ``copy`` was carried from: its ``carried_from``, or for a
    copy made before that column, the id its reason names (see :func:`_copy`)."""
    if copy.carried_from is not None:
        return copy.carried_from
    found = _COPIED.match(copy.reason)
    return found.group(1) if found else None


def copies_in_force(session: Session, original: OverrideRecord) -> list[OverrideRecord]:
    """The copies regrades made of ``original`` (and of those copies, onward) that are
    still in force on their gradings, oldest first. Copies are only ever made onto later
    gradings of the same submission, so only those gradings' overrides are read; a copy
    made before ``carried_from`` existed is known by its reason, taken only when it is
    the same author's override of the same target (as a withdrawal's label is found).
    Read before their gradings are locked, the list may miss a copy a regrade completing
    meanwhile carries onward, so adjudication's withdrawal locks those gradings and asks
    again until no new one turns up."""
    query = (
        select(OverrideRecord)
        .join(GradingRecord, col(GradingRecord.id) == col(OverrideRecord.grading_id))
        .where(
            col(GradingRecord.submission_id)
            == select(col(GradingRecord.submission_id))
            .where(col(GradingRecord.id) == original.grading_id)
            .scalar_subquery(),
            col(OverrideRecord.grading_id) != original.grading_id,
        )
    )
    records = list(session.execute(query).scalars())
    target = (original.author_id, original.kind, original.question_id)
    descended: set[str] = set()
    frontier = {original.id}
    while frontier:
        found = {
            r.id
            for r in records
            if carried_source(r) in frontier
            and r.id not in descended
            and (r.author_id, r.kind, r.question_id) == target
        }
        descended |= found
        frontier = found
    by_grading: dict[str, list[OverrideRecord]] = {}
    for r in records:
        by_grading.setdefault(r.grading_id, []).append(r)
    in_force = {
        event.id
        for held in by_grading.values()
        for event in overrides_in_force(override_events(held)).values()
    }
    copies = [r for r in records if r.id in descended and r.id in in_force]
    return sorted(copies, key=lambda r: (r.created_at, r.id))


def _copy(record: OverrideRecord, grading_id: str, job_id: str, at: datetime) -> OverrideRecord:
    note = f"carried by regrade job {job_id} from override {record.id}: {record.reason}"
    return OverrideRecord(
        grading_id=grading_id,
        kind=record.kind,
        question_id=record.question_id,
        answer=record.answer,
        verdict=record.verdict,
        reason=note,
        author_id=record.author_id,
        author_name=record.author_name,
        created_at=at,
        carried_from=record.id,
    )


def _apply(session: Session, grading: GradingRecord, rubric: Rubric | None) -> None:
    """Recompute the new grading's effective figures with the carried overrides."""
    query = select(OverrideRecord).where(col(OverrideRecord.grading_id) == grading.id)
    in_force = overrides_in_force(override_events(list(session.execute(query).scalars())))
    query_answers = select(AnswerRecord).where(col(AnswerRecord.grading_id) == grading.id)
    answers = {a.question_id: a.answer for a in session.execute(query_answers).scalars()}
    # something was carried: with no answers (unscored), that is a verdict override
    apply_in_force(grading, rubric, answers, in_force)


def carry_overrides(
    session: Session,
    grading: GradingRecord,
    previous: GradingRecord,
    at: datetime,
    *,
    current: Rubric | None,
) -> Carried:
    """Carry the previous grading's overrides in force onto ``grading`` (same transaction).

    ``current``: the current version of ``previous``'s rubric (the rubric file's), which
    ``previous`` reads with when no stored version is its own (:func:`_rubric_read`)."""
    outcome = Carried()
    query = select(OverrideRecord).where(col(OverrideRecord.grading_id) == previous.id)
    records = list(session.execute(query).scalars())
    in_force = overrides_in_force(override_events(records))
    if not in_force:
        return outcome
    by_id = {r.id: r for r in records}
    new = _rubric(session, grading)
    old = _rubric_read(session, previous, current)
    for event in in_force.values():
        if _carries(event, old, new, graded=grading.status == "graded"):
            copy = _copy(by_id[event.id], grading.id, grading.regrade_job_id or "", at)
            session.add(copy)
            outcome.carried.append(event.id)
            outcome.copies.append(copy)
        else:
            outcome.outdated.append(event.id)
            outcome.verdict_outdated |= event.kind == "verdict"
    session.flush()
    if outcome.carried:
        _apply(session, grading, new)
    if outcome.outdated:
        grading.needs_review = True
        grading.review_reasons = [*grading.review_reasons, ReviewReason.OVERRIDE_OUTDATED]
    return outcome
