"""Appending human overrides of answers and verdicts under an expected revision.

An override is a new row pointing at the override it supersedes; nothing of the
judge's is updated. The grading's effective figures are recomputed from the judge's
answers and the overrides in force (``storage.overrides.apply_in_force``), its revision
(the ETag) goes up, an answer or verdict becomes a human label, the grading's review is
closed (unless a pass stays held), and the append is audited as ``grading.overridden``,
all in the caller's transaction. A withdrawal withdraws the regrades' copies of the
override still in force on later gradings too, each audited on its own grading. An
answer or verdict override of a grading a promoted regrade superseded is refused
(``api.adjudication.superseded``): the promote carried the overrides in force then, and
the verdict in force is the current grading's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from sqlmodel import col

from api.adjudication.review_queries import ReviewQueries
from api.adjudication.superseded import refuse_superseded
from judge.adjudication import overrides_in_force, target_of
from judge.rubric import Rubric
from storage.audit import values_digest
from storage.audit.records import RecordRow
from storage.catalog import CatalogRepository
from storage.database import Database
from storage.errors import Conflict, InvalidReview, NotFound, PreconditionFailed
from storage.models import GradingView
from storage.overrides import apply_in_force, override_events
from storage.regrade.carry import carried_source, copies_in_force
from storage.regrade.lifecycle import GRADING_LOCK_ORDER
from storage.review_tables import HumanLabelRecord, OverrideRecord
from storage.tables import AnswerRecord, GradingRecord, row_values

__all__ = ["Kind", "OverrideQueries"]

Kind = Literal["answer", "verdict", "withdraw"]


class OverrideQueries:
    """Appending overrides and reading them."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``; an override closes the grading's review."""
        self._db = db
        self._review = ReviewQueries(db)

    async def history(self, grading_id: str) -> list[OverrideRecord]:
        """Every override of a grading, oldest first."""
        return await self._db.run_read(self._overrides, grading_id)

    @staticmethod
    def _overrides(session: Session, grading_id: str) -> list[OverrideRecord]:
        query = (
            select(OverrideRecord)
            .where(col(OverrideRecord.grading_id) == grading_id)
            .order_by(col(OverrideRecord.created_at), col(OverrideRecord.id))
        )
        return list(session.execute(query).scalars())

    @staticmethod
    def read_recent_reasons(session: Session, author_id: str, *, limit: int = 8) -> list[str]:
        """The last distinct reasons ``author_id`` gave for overrides, newest first."""
        query = (
            select(col(OverrideRecord.reason), func.max(col(OverrideRecord.created_at)))
            .where(col(OverrideRecord.author_id) == author_id)
            .group_by(col(OverrideRecord.reason))
            .order_by(func.max(col(OverrideRecord.created_at)).desc())
            .limit(limit)
        )
        return [reason for reason, _ in session.execute(query)]

    def add_in(
        self,
        session: Session,
        grading_id: str,
        *,
        view: GradingView | None = None,
        rubric: Rubric,
        expected_revision: int,
        kind: Kind,
        reason: str,
        author_id: str,
        author_name: str,
        question_id: str | None = None,
        answer: bool | None = None,
        verdict: Literal["pass", "fail"] | None = None,
        withdraws: str | None = None,
    ) -> tuple[OverrideRecord, GradingRecord]:
        """Append an override if the grading is still at ``expected_revision``, inside the
        caller's write transaction. ``view``: the grading as the caller read it in this
        transaction (not read again; on PostgreSQL its row is locked and re-read).

        A withdrawal also withdraws the copies regrades made of the withdrawn override
        that are still in force on later gradings of the submission (the current one a
        promote made, a shadow regrade's), each as a withdrawal on its grading in the
        same author's name: the human took the decision back, wherever it was carried.

        Raises NotFound, PreconditionFailed (stale revision), Superseded (an answer or
        verdict override of a grading a promoted regrade replaced: it would reach no
        verdict in force; checked first), Conflict (a pending grading, or a cancelled
        regrade item) or InvalidReview
        (an unknown question or override, an answer override on a grading whose answers
        the rule cannot be recomputed on).
        """
        # an answer or verdict on a grading a promote superseded would reach no verdict
        # in force: refused before a stale revision (the promote moved it) is reported
        amends = kind != "withdraw"
        held: dict[str, GradingRecord] = {}
        if kind == "withdraw" and self._db.postgres:
            grading, held = self._locked_with_copies(
                session, grading_id, expected_revision, withdraws
            )
        elif view is None or self._db.postgres:
            grading = self._locked_grading(session, grading_id, expected_revision, amends=amends)
        else:  # SQLite: the caller's write transaction has held the database since it began
            grading = self._checked_grading(session, view.grading, expected_revision, amends=amends)
        # answers are never changed by an override: the caller's read of them holds
        records = list(view.answers) if view is not None else self._answers(session, grading_id)
        history = self._overrides(session, grading_id)
        record = OverrideRecord(
            grading_id=grading_id,
            kind=kind,
            question_id=question_id,
            answer=answer,
            verdict=verdict,
            withdraws=withdraws,
            reason=reason,
            author_id=author_id,
            author_name=author_name,
            created_at=_after(history, self._db.clock()),
        )
        self._check(record, rubric, {a.question_id: a.answer for a in records}, history)
        label = self._label(session, record, history)
        copies: list[OverrideRecord] = []
        copy_gradings: dict[str, GradingRecord] = {}
        if record.kind == "withdraw":
            withdrawn = next(h for h in history if h.id == record.withdraws)
            copies, copy_gradings = self._copies_locked(session, withdrawn, held)
        self._append(session, grading, records, history, record, rubric=rubric, label=label)
        for copy in copies:
            self._withdraw_copy(session, copy_gradings[copy.grading_id], copy, record)
        return record, grading

    def _append(
        self,
        session: Session,
        grading: GradingRecord,
        records: list[AnswerRecord],
        history: list[OverrideRecord],
        record: OverrideRecord,
        *,
        rubric: Rubric | None,
        label: HumanLabelRecord | None,
    ) -> None:
        """Write the checked ``record`` (and the human ``label`` it records) onto
        ``grading``: its effective figures recomputed, its revision up, its review
        closed or reopened, audited as ``grading.overridden``."""
        record.supersedes = self._superseded(record, history)
        session.add(record)
        session.flush()
        after = overrides_in_force(override_events([*history, record]))
        apply_in_force(grading, rubric, {a.question_id: a.answer for a in records}, after)
        grading.revision += 1
        written: list[RecordRow] = [record]
        if label is not None:
            session.add(label)
            written.append(label)
        if grading.passed is None and not grading.held:
            # no verdict at all (a human's verdict withdrawn): it needs a human again
            self._review.reopen(session, grading.id)
        elif not grading.held:  # a held pass stays in the queue until a verdict is given
            self._review.close(session, grading.id, record.author_id)
        session.flush()
        # the digest of the state just written, from the values in hand: no read-back
        digest = values_digest(row_values(grading), [row_values(a) for a in records])
        self._db.audit(
            session,
            "grading.overridden",
            entity_type="grading",
            entity_id=grading.id,
            actor=record.author_id,
            payload=self._payload(record, grading),
            covers={grading.id: digest},
            rows=written,
        )

    def _locked_with_copies(
        self,
        session: Session,
        grading_id: str,
        expected_revision: int | None,
        withdraws: str | None,
    ) -> tuple[GradingRecord, dict[str, GradingRecord]]:
        """On PostgreSQL, for a withdrawal: the grading withdrawn on, row-locked and
        checked as ``_locked_grading`` does, and the gradings the copies of the override
        ``withdraws`` lay on when looked for without a lock, by id, row-locked with it in
        one pass, oldest first (``GRADING_LOCK_ORDER``), as a regrade batch locks the
        gradings its items follow and promote over
        (``storage.regrade.lifecycle.lock_items``). The grading withdrawn on is not
        always the oldest of them: a promote carries from the grading it replaces, which
        can be newer than its item (made when its job was), and a batch whose item
        follows the one and promotes over the other takes the older first, as this does.
        ``_copies_locked`` then looks again under these locks."""
        withdrawn = session.get(OverrideRecord, withdraws) if withdraws else None
        copies: list[OverrideRecord] = []  # an unknown one is refused under the lock
        if withdrawn is not None and withdrawn.grading_id == grading_id:
            copies = copies_in_force(session, withdrawn)
        order = self._oldest_first(session, {grading_id} | {c.grading_id for c in copies})
        held: dict[str, GradingRecord] = {}
        for held_id in order if grading_id in order else [grading_id]:  # else NotFound
            expected = expected_revision if held_id == grading_id else None
            held[held_id] = self._locked_grading(session, held_id, expected)
        return held.pop(grading_id), held

    def _copies_locked(
        self, session: Session, withdrawn: OverrideRecord, held: dict[str, GradingRecord]
    ) -> tuple[list[OverrideRecord], dict[str, GradingRecord]]:
        """The copies of ``withdrawn`` still in force on later gradings, and those
        gradings by id, row-locked, before the first audit record (row locks come before
        the audit chain's lock: ``storage.database``). ``held``: gradings of copies the
        caller has row-locked already (``_locked_with_copies``), by id.

        On PostgreSQL the copies are found again once their gradings are locked, until
        no new grading turns up: a regrade completing meanwhile holds the grading it
        carries from locked while it copies a copy onward onto its own grading, and
        that new copy, committed when the lock is given, was not there to be found
        before. The gradings found in one round are locked oldest first
        (``GRADING_LOCK_ORDER``), after those held. What remains: a grading found in a
        later round may be older than one held (its item was made when its job was,
        before the grading it carried from), and a regrade batch that locked it and then
        waits for a grading held here would deadlock with this withdrawal, which
        PostgreSQL ends by aborting one of the two. That takes a regrade committing a new
        copy between the first look and the locks, then another batch locking its
        grading before this one does.
        A new copy only lies on a grading whose regrade has committed and given its
        row back; a later regrade carrying from that grading meanwhile is waited for,
        and the next round finds its copy. Locking every grading of the submission up
        front would not do: the grading a promote completes is pending until it
        commits, so a lock taken without it misses its copy as before, and one that
        waits for its row while holding the others takes them in the reverse of the
        promote's order (its item first), a deadlock. On SQLite the write transaction
        has held the database since it began: one look finds them all."""
        locked = dict(held)
        while True:
            copies = copies_in_force(session, withdrawn)
            new = self._oldest_first(session, {c.grading_id for c in copies} - locked.keys())
            for grading_id in new:
                locked[grading_id] = self._locked_grading(session, grading_id, None)
            if not new or not self._db.postgres:
                return copies, locked

    @staticmethod
    def _oldest_first(session: Session, grading_ids: set[str]) -> list[str]:
        """The gradings' ids in the order a transaction locks several graded gradings in."""
        if not grading_ids:
            return []
        query = select(col(GradingRecord.id)).where(col(GradingRecord.id).in_(grading_ids))
        return list(session.execute(query.order_by(*GRADING_LOCK_ORDER)).scalars())

    def _withdraw_copy(
        self,
        session: Session,
        grading: GradingRecord,
        copy: OverrideRecord,
        withdrawal: OverrideRecord,
    ) -> None:
        """Withdraw ``copy`` (a regrade's copy of the override ``withdrawal`` withdraws) on
        its own ``grading`` (row-locked by the caller), as of now, in the name of
        ``withdrawal``'s author, with a reason that names the withdrawal. No label: the
        one the original recorded is retracted by ``withdrawal`` (a copy recorded none)."""
        history = self._overrides(session, copy.grading_id)
        if copy.id not in {e.id for e in overrides_in_force(override_events(history)).values()}:
            return  # replaced or withdrawn there meanwhile (read before the row was locked)
        record = OverrideRecord(
            grading_id=copy.grading_id,
            kind="withdraw",
            withdraws=copy.id,
            reason=(
                f"override {withdrawal.withdraws} withdrawn on grading {withdrawal.grading_id} "
                f"(withdrawal {withdrawal.id}): {withdrawal.reason}"
            ),
            author_id=withdrawal.author_id,
            author_name=withdrawal.author_name,
            created_at=_after(history, self._db.clock()),
        )
        # a copy lands on a regrade's grading, which names a stored rubric version
        rubric = CatalogRepository.read_rubric(session, grading.rubric_id, grading.rubric_version)
        records = self._answers(session, copy.grading_id)
        self._append(session, grading, records, history, record, rubric=rubric, label=None)

    @staticmethod
    def _answers(session: Session, grading_id: str) -> list[AnswerRecord]:
        query = select(AnswerRecord).where(col(AnswerRecord.grading_id) == grading_id)
        return list(session.execute(query).scalars())

    def _locked_grading(
        self,
        session: Session,
        grading_id: str,
        expected_revision: int | None,
        *,
        amends: bool = False,
    ) -> GradingRecord:
        """The graded grading, row-locked, if it is still at ``expected_revision`` (None:
        at whatever revision it is); ``amends``: and not superseded by a promote."""
        query = select(GradingRecord).where(col(GradingRecord.id) == grading_id)
        if self._db.postgres:
            query = query.with_for_update()
        grading = session.execute(
            query.execution_options(populate_existing=True)
        ).scalar_one_or_none()
        if grading is None:
            raise NotFound(f"no grading {grading_id}")
        return self._checked_grading(session, grading, expected_revision, amends=amends)

    @staticmethod
    def _checked_grading(
        session: Session,
        grading: GradingRecord,
        expected_revision: int | None,
        *,
        amends: bool = False,
    ) -> GradingRecord:
        """``grading`` if it has a result (graded or unscored) and is still at
        ``expected_revision`` (None: any); ``amends`` (an answer or verdict override):
        Superseded, first, when a promote replaced it. Conflict for a grading whose judge
        has not answered: a pending one, or an item of a cancelled regrade job, which a
        resume makes pending again (its result, once in, would overtake the human's)."""
        if amends:
            refuse_superseded(session, grading, instead="override that one")
        if expected_revision is not None and grading.revision != expected_revision:
            raise PreconditionFailed(
                f"the grading is at revision {grading.revision}, not {expected_revision}",
                current_revision=grading.revision,
            )
        if grading.status == "pending":
            raise Conflict("a pending grading cannot be overridden before it is graded")
        if grading.status == "cancelled":
            raise Conflict(
                "this item of a cancelled regrade job has no result to override: "
                "resume the job, and override it once it has a result"
            )
        return grading

    @staticmethod
    def _check(
        record: OverrideRecord,
        rubric: Rubric,
        answers: dict[str, bool],
        history: list[OverrideRecord],
    ) -> None:
        if record.kind == "answer":
            if record.question_id not in {q.id for q in rubric.questions}:
                raise InvalidReview(f"unknown question {record.question_id!r}", field="question_id")
            if not answers:
                raise InvalidReview(
                    "an unscored grading has no answers to override; override the verdict",
                    field="question_id",
                )
            unanswered = [q.id for q in rubric.questions if q.id not in answers]
            if unanswered:  # an imported checklist that left questions out
                raise InvalidReview(
                    f"the grading has no answer to {', '.join(unanswered)}, so the rule cannot "
                    "be applied to its answers; override the verdict",
                    field="question_id",
                )
        if record.kind == "withdraw":
            in_force = overrides_in_force(override_events(history))
            if record.withdraws not in {e.id for e in in_force.values()}:
                raise InvalidReview(
                    f"no override {record.withdraws!r} in force on this grading", field="withdraw"
                )

    @staticmethod
    def _superseded(record: OverrideRecord, history: list[OverrideRecord]) -> str | None:
        """The override in force on the same target that ``record`` replaces, if any."""
        if record.kind == "withdraw":
            return None
        in_force = overrides_in_force(override_events(history))
        previous = in_force.get(target_of(override_events([record])[0]))
        return previous.id if previous else None

    @staticmethod
    def _label(
        session: Session, record: OverrideRecord, history: list[OverrideRecord]
    ) -> HumanLabelRecord | None:
        """The human label an override records: its author's answer or verdict; for a
        withdrawal, the retraction of the withdrawn override's label (its author and
        target, no answer nor verdict), so judge-human agreement no longer counts a
        judgement taken back. A copy a regrade carried recorded no label: its original
        did, on the grading the human judged, and that label is the one retracted, only
        while it is still its author's latest there: one who has since decided that
        answer or verdict again on that grading stands by the later label, which a
        retraction would take back (a stale copy withdrawn off a shadow grading)."""
        if record.kind == "withdraw":
            withdrawn = next((h for h in history if h.id == record.withdraws), None)
            if withdrawn is None or withdrawn.kind == "withdraw":
                return None
            original, seen = withdrawn, {withdrawn.id}
            while (source := _carried_from(session, original)) is not None:
                if source.id in seen:  # reasons that name each other: no original
                    break
                original = source
                seen.add(source.id)
            if original is not withdrawn and not _latest_label(session, original):
                return None
            return HumanLabelRecord(
                grading_id=original.grading_id,
                question_id=withdrawn.question_id if withdrawn.kind == "answer" else None,
                source="override",
                author_id=withdrawn.author_id,
                author_name=withdrawn.author_name,
                created_at=record.created_at,
            )
        return HumanLabelRecord(
            grading_id=record.grading_id,
            question_id=record.question_id if record.kind == "answer" else None,
            answer=record.answer,
            verdict=record.verdict,
            source="override",
            author_id=record.author_id,
            author_name=record.author_name,
            created_at=record.created_at,
        )

    @staticmethod
    def _payload(record: OverrideRecord, grading: GradingRecord) -> dict[str, Any]:
        return {
            "override_id": record.id,
            "kind": record.kind,
            "question_id": record.question_id,
            "answer": record.answer,
            "verdict": record.verdict,
            "withdraws": record.withdraws,
            "supersedes": record.supersedes,
            "reason": record.reason,
            "author": record.author_name,
            "passed": grading.passed,
            "held": grading.held,
            "yes_count": grading.yes_count,
            "revision": grading.revision,
        }


def _after(history: list[OverrideRecord], now: datetime) -> datetime:
    """When a new override is made: ``now``, or just after the grading's latest override
    when that one is stamped later (a clock stepped back, or another server's ahead), so
    that the grading's overrides apply in the order they were made."""
    latest = max((h.created_at for h in history), default=None)
    if latest is None or now > latest:
        return now
    return latest + timedelta(microseconds=1)


def _latest_label(session: Session, override: OverrideRecord) -> bool:
    """Whether the label ``override`` recorded is still its author's latest override
    label on its grading's answer or verdict (labels count latest first, by id, in
    judge-human agreement): not followed by a later override's label or a retraction."""
    query = (
        select(HumanLabelRecord)
        .where(
            col(HumanLabelRecord.grading_id) == override.grading_id,
            col(HumanLabelRecord.author_id) == override.author_id,
            col(HumanLabelRecord.source) == "override",
            col(HumanLabelRecord.question_id).is_(None)
            if override.kind == "verdict"
            else col(HumanLabelRecord.question_id) == override.question_id,
        )
        .order_by(col(HumanLabelRecord.id).desc())
        .limit(1)
    )
    latest = session.execute(query).scalar_one_or_none()
    return latest is not None and (latest.created_at, latest.answer, latest.verdict) == (
        override.created_at,
        override.answer,
        override.verdict,
    )


def _carried_from(session: Session, override: OverrideRecord) -> OverrideRecord | None:
    """The override ``override`` is a regrade's copy of, or None. A copy made before
    ``carried_from`` existed names it only in its reason: it is read from there, and
    taken only when it is the same author's override of the same target (a human's
    reason mimicking the words names nothing of anyone else's)."""
    source_id = carried_source(override)
    source = session.get(OverrideRecord, source_id) if source_id is not None else None
    if source is None:
        return None
    same = (source.author_id, source.kind, source.question_id) == (
        override.author_id,
        override.kind,
        override.question_id,
    )
    return source if same else None
