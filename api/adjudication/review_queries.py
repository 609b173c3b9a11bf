"""The review queue and review claims: which gradings need a human, and who holds one.

Why this module is long: what the queue shows (its filters, order, pages and counts) and
the claims that hide an item from others or give it back are one rule of who sees what
when; split in two, each half would restate the other's conditions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import String, and_, case, cast, exists, func, or_, select, tuple_, update
from sqlalchemy.orm import Session
from sqlmodel import col

from api.adjudication.superseded import refuse_superseded
from judge.review_reasons import ReviewReason, by_priority, hold_explanation
from storage.bytewise import bytewise_contains
from storage.canonical import iso_utc
from storage.claims import graded_ground_truth
from storage.cursors import CursorCodec, continues
from storage.database import AuditBatch, Database
from storage.errors import Conflict, InvalidCursor, InvalidReview, NotFound
from storage.gradings import grading_position, records_by_grading
from storage.review_tables import ReviewClaimRecord
from storage.tables import (
    RESULT_STATUSES,
    AnswerRecord,
    GradingRecord,
    SubmissionRecord,
    TokenRecord,
)

__all__ = [
    "LOW_CONFIDENCE",
    "MAX_PAGE",
    "REVIEWER_ROLES",
    "Assignee",
    "QueueCounts",
    "QueueFilter",
    "QueuePage",
    "QueuePlace",
    "ReviewItem",
    "ReviewQueries",
    "ReviewState",
]

#: a judge answer below this confidence asks for a human
LOW_CONFIDENCE = 0.5
#: the roles an item can be assigned to
REVIEWER_ROLES = ("adjudicator", "admin")
#: the most items one page of the queue holds
MAX_PAGE = 500
_R = ReviewReason


@dataclass(frozen=True)
class ReviewItem:
    """A grading in the queue with why it is there and who holds it."""

    grading: GradingRecord
    submission: SubmissionRecord
    answers: tuple[AnswerRecord, ...]
    reasons: tuple[str, ...]
    claim: ReviewClaimRecord | None
    #: the ground truth the grading is judged against (its scenario version's text)
    ground_truth: str | None = None
    #: who holds the item now, by name: None when nobody does (no claim, one run out,
    #: or one made with a token since revoked or expired, which holds nothing)
    holder: str | None = None
    #: the item's place in the queue's order (:class:`QueuePlace`), signed: a cursor that
    #: ``read_page`` takes as ``after`` (the items behind it) or ``starting_at`` (it, then
    #: those behind it)
    key: str = ""


@dataclass(frozen=True)
class ReviewState:
    """An item's review row as a skip or an assignment left it, and who holds the item
    now by name (as ``ReviewItem.holder``: None when nobody does)."""

    claim: ReviewClaimRecord
    holder: str | None


@dataclass(frozen=True)
class QueueFilter:
    """Which of the queued items to keep; None keeps all. ``assigned_to`` is a token id,
    ``judge`` a part of the grading judge's ``backend:model`` (case-sensitive), ``reason``
    a review reason."""

    agent: str | None = None
    scenario_id: str | None = None
    reason: str | None = None
    assigned_to: str | None = None
    model: str | None = None
    judge: str | None = None
    provisional: bool | None = None


@dataclass(frozen=True)
class QueuePage:
    """A page of the queue, most urgent first; ``next_cursor`` continues it (None on the
    last page)."""

    items: list[ReviewItem]
    next_cursor: str | None


@dataclass(frozen=True)
class QueueCounts:
    """How many items a (filtered) queue holds, in all and per review reason (an item
    with several reasons counts under each)."""

    total: int
    by_reason: dict[str, int]


@dataclass(frozen=True)
class Assignee:
    """An adjudicator or admin an item can be assigned to: a usable token and its name."""

    id: str
    name: str


def _unscored() -> Any:
    """Unscored, or graded with no verdict and none held: an SREGym checklist that left
    questions out beside no success, as earlier versions stored it (graded, its answers
    kept); every view reads it as unscored (``verdict_label``), so the queue does too."""
    return or_(
        col(GradingRecord.status) == "unscored",
        and_(
            col(GradingRecord.status) == "graded",
            col(GradingRecord.passed).is_(None),
            col(GradingRecord.held).is_not(True),
        ),
    )


def _is_unscored(grading: GradingRecord) -> bool:
    """:func:`_unscored` of one grading read."""
    return grading.status == "unscored" or (
        grading.status == "graded" and grading.passed is None and not grading.held
    )


def _needs_a_human() -> Any:
    """Unscored, flagged for review, held, decisive or of low confidence."""
    return or_(
        _unscored(),
        col(GradingRecord.needs_review).is_(True),
        col(GradingRecord.held).is_(True),
        and_(col(GradingRecord.status) == "graded", col(GradingRecord.decisive).is_(True)),
        _low_confidence(),
    )


def _low_confidence() -> Any:
    return exists().where(
        col(AnswerRecord.grading_id) == GradingRecord.id,
        col(AnswerRecord.confidence) < LOW_CONFIDENCE,
    )


def _unsure(answers: Sequence[AnswerRecord]) -> bool:
    """Some answer was given with a confidence below ``LOW_CONFIDENCE``."""
    return any(a.confidence is not None and a.confidence < LOW_CONFIDENCE for a in answers)


def _reason_filter(reason: str) -> Any:
    if reason == _R.UNSCORED:
        return _unscored()
    if reason == _R.DECISIVE:
        return and_(col(GradingRecord.status) == "graded", col(GradingRecord.decisive).is_(True))
    if reason == _R.LOW_CONFIDENCE:
        return _low_confidence()
    return _carries(reason)


def _carries(reason: str) -> Any:
    """The stored ``review_reasons`` (a JSON list) hold ``reason``."""
    return cast(GradingRecord.review_reasons, String).like(f'%"{reason}"%')


#: signs that the verdict itself may be wrong: judges disagreeing, a judge unsure, a
#: "yes" a check in code vetoed, reasoning against the answer, text addressing the judge,
#: a diagnosis not grounded in the ground truth
LIKELY_WRONG = (
    _R.JUDGE_SPLIT,
    _R.JUDGE_OVERRULED,
    _R.REASONING_CONTRADICTS,
    _R.INJECTION_SUSPECTED,
    _R.GROUNDING_FAILED,
)


def _urgency() -> Any:
    """The tier the queue ranks a grading by (lower first): a missing verdict (held, then
    unscored), then signs that the verdict may be wrong (``LIKELY_WRONG``, low confidence),
    then a verdict one answer decides, then flags that ask for a look (an unverified
    quote, a flag for review, any other reason), all in one tier; within a tier failures
    before passes (the queue then lists oldest first)."""
    tier = case(
        (col(GradingRecord.held).is_(True), 0),  # a verdict is missing: before all else
        (_unscored(), 1),
        (or_(*(_carries(r) for r in LIKELY_WRONG), _low_confidence()), 2),
        (and_(col(GradingRecord.status) == "graded", col(GradingRecord.decisive).is_(True)), 3),
        else_=4,
    )
    return tier * 2 + case((col(GradingRecord.passed).is_(False), 0), else_=1)


#: how many values ``_urgency`` takes (five tiers, failures and the rest in each)
_TIERS = 10


@dataclass(frozen=True)
class QueuePlace:
    """An item's place in the queue's order: its urgency tier, then its submission's
    place in the list of gradings (``listed_at``, then the submission's id), then the
    grading's id.

    ``listed_at`` is when the submission's grading was made, and a promoted regrade item
    takes the ``listed_at`` of the grading it replaced (``storage.regrade.lifecycle``),
    as the list of gradings orders them (``storage.gradings.ListPosition``): an item a
    promotion regrades keeps its place, and its age. The queue holds current gradings
    only, one a submission, so ``(tier, listed_at, submission_id)`` names the item before
    and after a promotion; the grading's id, kept in the key, orders nothing further."""

    tier: int
    listed_at: datetime
    submission_id: str
    grading_id: str

    @staticmethod
    def order(urgency: Any) -> tuple[Any, ...]:
        """The queue's order, ``urgency`` (the labelled :func:`_urgency`) first."""
        g = GradingRecord
        return (urgency, col(g.listed_at), col(g.submission_id), col(g.id))

    def behind(self, *, inclusive: bool) -> Any:
        """The condition of the items queued behind this place (and the item at it,
        ``inclusive``, whichever grading of its submission the queue holds now)."""
        g = GradingRecord
        # a row value (the columns' own types bind the values), as the list of gradings
        # compares its places
        place = tuple_(col(g.listed_at), col(g.submission_id))
        here = (self.listed_at, self.submission_id)
        later = place >= here if inclusive else place > here
        return or_(_urgency() > self.tier, and_(_urgency() == self.tier, later))

    def cursor(self, codec: CursorCodec) -> str:
        """The signed key of this place (a queue cursor)."""
        stamp = iso_utc(self.listed_at)
        return codec.encode([self.tier, stamp, self.submission_id, self.grading_id])

    @classmethod
    def of_cursor(cls, codec: CursorCodec, cursor: str) -> QueuePlace:
        """The place a queue cursor ``codec`` signed holds; InvalidCursor for any other,
        also for one issued when the queue was ordered by the grading's creation time (a
        client starts again from the first page)."""
        position = codec.decode(cursor)
        if len(position) == 3:
            raise InvalidCursor(
                "the cursor was issued by an earlier version of the service: "
                "start again from the first page"
            )
        tier = position[0] if len(position) == 4 else None
        if type(tier) is not int or not 0 <= tier < _TIERS:
            raise InvalidCursor("the cursor is not one this service issued")
        stamp, submission_id, grading_id = position[1:]
        # each id checked as a signed position's id, with the time it was issued with
        listed_at, grading_id = grading_position([stamp, grading_id])
        _, submission_id = grading_position([stamp, submission_id])
        return cls(tier, listed_at, submission_id, grading_id)


class ReviewQueries:
    """The queue of gradings that need a human, and claims on them."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        self._cursors = CursorCodec(db.key, "review-queue")

    def read_page(
        self,
        session: Session,
        *,
        principal_id: str,
        filters: QueueFilter | None = None,
        after: str | None = None,
        starting_at: str | None = None,
        limit: int = 50,
    ) -> QueuePage:
        """Gradings that need a human, most urgent first, without done items or items
        another adjudicator holds a valid claim on, under ``filters`` (every one applied
        before the limit), and the cursor of the next page (None on the last). ``after``
        (a page's ``next_cursor``, an item's ``key``) continues strictly after that
        place in the queue's order (:class:`QueuePlace`); ``starting_at``
        (an item's ``key``) from that place on, the item itself included while it is
        still there. InvalidCursor for a cursor this service did not issue."""
        now = self._db.clock()
        urgency = _urgency().label("urgency")
        dead = _claimed_by_a_dead_token(now).label("dead_claim")
        query = self._queued(
            select(GradingRecord, SubmissionRecord, ReviewClaimRecord, urgency, dead),
            principal_id,
            filters or QueueFilter(),
        )
        if continues(after):
            query = query.where(self._place(after).behind(inclusive=False))
        if starting_at is not None:
            query = query.where(self._place(starting_at).behind(inclusive=True))
        size = max(1, min(limit, MAX_PAGE))
        query = query.order_by(*QueuePlace.order(urgency)).limit(size + 1)
        rows = list(session.execute(query).all())
        more, rows = len(rows) > size, rows[:size]
        order = (col(AnswerRecord.grading_id), col(AnswerRecord.position))
        answers = records_by_grading(session, AnswerRecord, [g.id for g, *_ in rows], order=order)
        items = [
            ReviewItem(
                grading=g,
                submission=s,
                answers=tuple(answers[g.id]),
                reasons=self._reasons(g, _unsure(answers[g.id])),
                claim=c,
                ground_truth=graded_ground_truth(session, g, s),
                holder=None if c is None or dead_claim else c.holder(now),
                key=QueuePlace(int(tier), g.listed_at, g.submission_id, g.id).cursor(self._cursors),
            )
            for g, s, c, tier, dead_claim in rows
        ]
        cursor = items[-1].key if more and items else None
        return QueuePage(items=items, next_cursor=cursor)

    def read_counts(
        self,
        session: Session,
        *,
        principal_id: str,
        filters: QueueFilter | None = None,
        after: str | None = None,
    ) -> QueueCounts:
        """How many items the queue holds under ``filters`` (as :meth:`read_page` sees
        it, every item, not a page; ``after``: those behind that place only), and how
        many of them carry each review reason (as ``reason=`` selects them), counted in
        the database in one statement."""
        counted = [func.count(case((_reason_filter(r.value), 1))) for r in ReviewReason]
        query = self._queued(select(func.count(), *counted), principal_id, filters or QueueFilter())
        if continues(after):
            query = query.where(self._place(after).behind(inclusive=False))
        total, *each = session.execute(query).one()
        by_reason = {r.value: int(n) for r, n in zip(ReviewReason, each, strict=True)}
        return QueueCounts(total=int(total), by_reason=by_reason)

    def _queued(self, query: Any, principal_id: str, filters: QueueFilter) -> Any:
        """``query`` (a select of any columns) over the gradings in the queue as
        ``principal_id`` sees it under ``filters``: current gradings that need a human,
        not done (a held pass stays until a verdict releases it), not held by another
        adjudicator's valid claim; ``assigned_to`` (a token id) keeps the items assigned
        to that adjudicator, ``model`` those of the agent's model, ``judge`` those whose
        ``backend:model`` holds it as written, ``provisional`` those provisional or not."""
        now = self._db.clock()
        query = (
            query.select_from(GradingRecord)
            .join(SubmissionRecord, col(GradingRecord.submission_id) == col(SubmissionRecord.id))
            .outerjoin(
                ReviewClaimRecord, col(ReviewClaimRecord.grading_id) == col(GradingRecord.id)
            )
            .where(
                col(GradingRecord.is_current).is_(True),
                _needs_a_human(),
                # a held pass stays until a verdict releases it, even if marked done
                or_(col(ReviewClaimRecord.done_at).is_(None), col(GradingRecord.held).is_(True)),
                or_(
                    col(ReviewClaimRecord.claimed_until).is_(None),
                    col(ReviewClaimRecord.claimed_until) <= now,  # run out: claim() agrees
                    col(ReviewClaimRecord.claimed_by) == principal_id,
                    _claimed_by_a_dead_token(now),
                ),
            )
        )
        f = filters
        if f.agent is not None:
            query = query.where(col(SubmissionRecord.agent) == f.agent)
        if f.scenario_id is not None:
            query = query.where(col(SubmissionRecord.scenario_id) == f.scenario_id)
        if f.reason is not None:
            query = query.where(_reason_filter(f.reason))
        if f.assigned_to is not None:
            query = query.where(col(ReviewClaimRecord.assigned_to) == f.assigned_to)
        if f.model is not None:
            query = query.where(col(SubmissionRecord.model) == f.model)
        if f.judge is not None:
            named = col(GradingRecord.judge_backend) + ":" + col(GradingRecord.judge_model)
            query = query.where(bytewise_contains(named, f.judge))
        if f.provisional is not None:
            query = query.where(col(GradingRecord.provisional).is_(f.provisional))
        return query

    def _place(self, cursor: str) -> QueuePlace:
        """The place a queue cursor names; InvalidCursor unless this service signed it
        for the review queue (:meth:`QueuePlace.of_cursor`)."""
        return QueuePlace.of_cursor(self._cursors, cursor)

    async def reviewed_since(
        self, since: datetime, *, agent: str | None = None, scenario_id: str | None = None
    ) -> int:
        """Reviews finished since ``since`` (of one agent's or one scenario's gradings),
        each once: a finished review a regrade carried onto its grading is the same one."""
        return await self._db.run_read(_reviewed_since, since, agent, scenario_id)

    @staticmethod
    def _reasons(grading: GradingRecord, low_confidence: bool) -> tuple[str, ...]:
        found: list[str] = []
        if _is_unscored(grading):
            found.append(_R.UNSCORED)
        found.extend(r for r in grading.review_reasons or [] if r != _R.UNSCORED)
        if grading.status == "graded" and grading.decisive:
            found.append(_R.DECISIVE)
        if low_confidence:
            found.append(_R.LOW_CONFIDENCE)
        return by_priority(found)

    async def claim(
        self,
        grading_id: str,
        *,
        principal_id: str,
        principal_name: str,
        minutes: float,
        reopen: bool = True,
    ) -> ReviewClaimRecord:
        """Hold a grading for review; Conflict when another holds a valid claim, and
        :class:`storage.errors.Superseded` naming the grading in force for one a promoted
        regrade replaced (the queue holds that one: a claim here would hide nothing). A
        claim puts a finished item back in the queue, unless ``reopen`` is False (a page
        merely opened): then a finished item's claim is returned as it is. A held pass
        is never finished while it is held (it stays queued until a verdict decides it,
        even with its review marked done): it is claimed as any queued item."""
        now = self._db.clock()

        def work(session: Session) -> ReviewClaimRecord:
            claim = self._claim_row(session, grading_id, in_force="review that one")
            grading = session.get(GradingRecord, grading_id)  # as _claim_row locked it
            held = grading is not None and grading.held
            if claim.done_at is not None and not held and not reopen:
                return claim
            if self._held_by_another(session, claim, principal_id):
                raise Conflict(
                    f"{claim.claimed_by_name} holds this review until {claim.claimed_until}"
                )
            claim.claimed_by, claim.claimed_by_name = principal_id, principal_name
            claim.claimed_until = now + timedelta(minutes=minutes)
            claim.done_at = None
            session.flush()
            self._db.audit(
                session,
                "review.claimed",
                entity_type="grading",
                entity_id=grading_id,
                actor=principal_id,
                payload={"until": claim.claimed_until.isoformat()},
            )
            return claim

        return await self._db.run(work)

    def _held_by_another(
        self, session: Session, claim: ReviewClaimRecord, principal_id: str
    ) -> bool:
        """Whether someone else holds the item now (:meth:`_holder`)."""
        if claim.claimed_by in (None, principal_id):
            return False
        return self._holder(session, claim) is not None

    def _state(self, session: Session, claim: ReviewClaimRecord) -> ReviewState:
        return ReviewState(claim=claim, holder=self._holder(session, claim))

    def _holder(self, session: Session, claim: ReviewClaimRecord) -> str | None:
        """Who holds the item now, by name, as the queue names them
        (``ReviewItem.holder``): None for no claim, one run out, or one made with a token
        since revoked or expired. The claim is read as flushed to the session."""
        now = self._db.clock()
        if claim.claimed_by is None or claim.holder(now) is None:
            return None
        dead = select(_claimed_by_a_dead_token(now)).where(
            col(ReviewClaimRecord.grading_id) == claim.grading_id
        )
        return None if session.execute(dead).scalar_one() else claim.holder(now)

    async def finish(self, grading_id: str, *, principal_id: str) -> None:
        """Mark a review done: the grading leaves the queue."""
        await self._db.run(self.finish_in, grading_id, principal_id=principal_id)

    def finish_in(
        self,
        session: Session,
        grading_id: str,
        *,
        principal_id: str,
        into: AuditBatch | None = None,
    ) -> None:
        """``finish`` in the caller's transaction: :class:`Conflict` for a held pass,
        which only a verdict override decides, and :class:`storage.errors.Superseded`
        naming the grading in force for one a promoted regrade replaced (the queue holds
        that one, claim included: finishing this one would leave it queued). The grading
        is row-locked and read afresh (PostgreSQL): an override committed since the
        caller read it may have made it a held pass, and the copy the session holds would
        not say so. ``into``: the audit event is collected there, for the caller to
        append after its other writes."""
        grading = session.get(
            GradingRecord, grading_id, with_for_update=self._db.postgres, populate_existing=True
        )
        if grading is None:
            raise NotFound(f"no grading {grading_id}")
        refuse_superseded(session, grading, instead="review that one")
        if grading.status not in RESULT_STATUSES:  # its outcome must still be queued
            raise Conflict(
                f"this grading ({grading.status}) has no result yet: review it once it has one"
            )
        if grading.held:
            why = hold_explanation(grading.review_reasons or [])
            raise Conflict(
                f"this grading's pass is held: {why}. "
                "Decide it with a verdict override (pass or fail, with a reason)"
            )
        claim = session.get(ReviewClaimRecord, grading_id)
        if claim is not None and self._held_by_another(session, claim, principal_id):
            raise Conflict(f"{claim.claimed_by_name} holds this review until {claim.claimed_until}")
        self.close(session, grading_id, principal_id)
        session.flush()
        self._db.audit(
            session,
            "review.done",
            entity_type="grading",
            entity_id=grading_id,
            actor=principal_id,
            payload={},
            into=into,
        )

    async def skip(
        self, grading_id: str, *, principal_id: str, principal_name: str, note: str | None
    ) -> ReviewState:
        """Record that ``principal_id`` skipped the item (with ``note`` for the next
        adjudicator, if any) and give back the claim it held on it: the item stays in the
        queue for others. Audited as ``review.skipped``. Superseded (409) for a grading a
        promoted regrade replaced: the skip goes on the grading in force. Returns the
        item's review row and who holds it."""

        def work(session: Session) -> ReviewState:
            claim = self._claim_row(session, grading_id, in_force="skip that one")
            claim.skipped_at = self._db.clock()
            claim.skipped_by, claim.skipped_by_name = principal_id, principal_name
            claim.skip_note = note or None
            if claim.claimed_by == principal_id:
                claim.claimed_by = claim.claimed_by_name = None
                claim.claimed_until = None
            session.flush()
            self._db.audit(
                session,
                "review.skipped",
                entity_type="grading",
                entity_id=grading_id,
                actor=principal_id,
                payload={"note": claim.skip_note},
            )
            return self._state(session, claim)

        return await self._db.run(work)

    async def release(self, grading_id: str, *, principal_id: str) -> bool:
        """Give back the claim ``principal_id`` holds on the item, if any (an adjudicator
        walked past it): others may take it at once. Audited as ``review.released`` when
        a claim was given back; returns whether one was. The grading is locked first, as
        by a claim: a claim another adjudicator made meanwhile stays theirs."""

        def work(session: Session) -> bool:
            if self._locked_grading(session, grading_id) is None:
                return False
            claim = session.get(ReviewClaimRecord, grading_id)
            if claim is None or claim.claimed_by != principal_id:
                return False
            claim.claimed_by = claim.claimed_by_name = None
            claim.claimed_until = None
            session.flush()
            self._db.audit(
                session,
                "review.released",
                entity_type="grading",
                entity_id=grading_id,
                actor=principal_id,
                payload={},
            )
            return True

        return await self._db.run(work)

    async def assign(
        self, grading_id: str, assignee: str | None, *, principal_id: str
    ) -> ReviewState:
        """Assign the item to ``assignee`` (a token id, or the name of one token) of an
        adjudicator or admin, or unassign it (None). InvalidReview naming ``assignee``
        when no usable adjudicator's or admin's token answers to it. Audited as
        ``review.assigned`` or ``review.unassigned`` (when it changes anything).
        Superseded (409) for a grading a promoted regrade replaced: the assignment goes
        on the grading in force. Returns the item's review row and who holds it."""

        def work(session: Session) -> ReviewState:
            claim = self._claim_row(session, grading_id, in_force="assign that one")
            if assignee is None:
                if claim.assigned_to is None:
                    return self._state(session, claim)
                was = {"assignee": claim.assigned_to, "assignee_name": claim.assigned_to_name}
                claim.assigned_to = claim.assigned_to_name = claim.assigned_by = None
                claim.assigned_at = None
                event, payload = "review.unassigned", was
            else:
                person = self._reviewer(session, assignee)
                if claim.assigned_to == person.id:
                    return self._state(session, claim)
                claim.assigned_to, claim.assigned_to_name = person.id, person.name
                claim.assigned_by, claim.assigned_at = principal_id, self._db.clock()
                event = "review.assigned"
                payload = {"assignee": person.id, "assignee_name": person.name}
            session.flush()
            self._db.audit(
                session,
                event,
                entity_type="grading",
                entity_id=grading_id,
                actor=principal_id,
                payload=payload,
            )
            return self._state(session, claim)

        return await self._db.run(work)

    def _reviewer(self, session: Session, assignee: str) -> Assignee:
        """The usable adjudicator's or admin's token ``assignee`` names (its id, or the
        name of exactly one such token); InvalidReview naming ``assignee`` otherwise."""
        usable = self._usable_tokens(session)
        by_id = session.get(TokenRecord, assignee)
        if by_id is not None and by_id.id in usable:
            found = [by_id]
        elif by_id is not None:
            raise InvalidReview(
                f"token {assignee!r} is revoked or expired: it cannot be assigned",
                field="assignee",
            )
        else:
            found = [t for t in usable.values() if t.name == assignee]
        if not found:
            raise InvalidReview(
                f"no adjudicator or admin is named {assignee!r} (give a token id or name)",
                field="assignee",
            )
        reviewers = [t for t in found if t.role in REVIEWER_ROLES]
        if not reviewers:
            raise InvalidReview(
                f"{assignee!r} is a {found[0].role}: only adjudicators and admins review",
                field="assignee",
            )
        if len(reviewers) > 1:
            raise InvalidReview(
                f"{len(reviewers)} tokens are named {assignee!r}: give the token id",
                field="assignee",
            )
        return Assignee(id=reviewers[0].id, name=reviewers[0].name)

    def _usable_tokens(self, session: Session) -> dict[str, TokenRecord]:
        """Tokens neither revoked nor expired, by id."""
        query = select(TokenRecord).where(_token_usable(self._db.clock()))
        return {t.id: t for t in session.execute(query).scalars()}

    async def assignees(self) -> list[Assignee]:
        """Everyone an item can be assigned to (usable adjudicators' and admins' tokens),
        by name."""
        return await self._db.run_read(self.read_assignees)

    def read_assignees(self, session: Session) -> list[Assignee]:
        """``assignees`` inside the caller's ``session``."""
        people = [
            Assignee(id=t.id, name=t.name)
            for t in self._usable_tokens(session).values()
            if t.role in REVIEWER_ROLES
        ]
        return sorted(people, key=lambda a: (a.name.casefold(), a.id))

    def _claim_row(
        self, session: Session, grading_id: str, *, in_force: str | None = None
    ) -> ReviewClaimRecord:
        """The grading's review row, made when it has none; NotFound for no grading.
        ``in_force`` (what to do on the grading in force instead, as ``"skip that one"``):
        Superseded (409) for a grading a promoted regrade replaced, whose review in
        progress followed the item onto that grading (``storage.regrade.lifecycle``).

        The grading's row is locked first (PostgreSQL; SQLite has one writer), so that
        the review rows of one grading change one transaction after another: of two
        claims at once one holds the item and the other sees it held, and the row is
        made once."""
        grading = self._locked_grading(session, grading_id)
        if grading is None:
            raise NotFound(f"no grading {grading_id}")
        if in_force is not None:
            refuse_superseded(session, grading, instead=in_force)
        claim = session.get(ReviewClaimRecord, grading_id)
        if claim is None:
            claim = ReviewClaimRecord(grading_id=grading_id)
            session.add(claim)
        return claim

    def _locked_grading(self, session: Session, grading_id: str) -> GradingRecord | None:
        """The grading, its row locked until the transaction ends (PostgreSQL; SQLite has
        one writer): the writers of its review row take this lock first."""
        return session.get(GradingRecord, grading_id, with_for_update=self._db.postgres)

    def reopen(self, session: Session, grading_id: str) -> None:
        """Put the grading's finished review back in the queue, in the caller's
        transaction (nothing when it has no review row)."""
        session.execute(
            update(ReviewClaimRecord)
            .where(col(ReviewClaimRecord.grading_id) == grading_id)
            .values(done_at=None, done_by=None)
        )

    def close(self, session: Session, grading_id: str, principal_id: str) -> None:
        """Mark the grading's review done by ``principal_id`` in the caller's transaction
        (one statement, whether the grading had a review row or not; a claim on it ends)."""
        table = ReviewClaimRecord.__table__  # type: ignore[attr-defined]
        done = {"grading_id": grading_id, "done_at": self._db.clock(), "done_by": principal_id}
        claim_ended = {"claimed_by": None, "claimed_by_name": None, "claimed_until": None}
        self._db.upsert(session, table, {**done, **claim_ended})


def _token_usable(now: datetime) -> Any:
    """A token neither revoked nor expired at ``now`` (a condition on its row)."""
    return and_(
        col(TokenRecord.revoked_at).is_(None),
        or_(col(TokenRecord.expires_at).is_(None), col(TokenRecord.expires_at) > now),
    )


def _claimed_by_a_dead_token(now: datetime) -> Any:
    """The review row's claim was made with a token since revoked or expired: it holds
    nothing (its holder gets 401 from now on). Claims of principals without a token row
    (the command line, anonymous use) are not dead."""
    dead = select(col(TokenRecord.id)).where(
        col(TokenRecord.id) == col(ReviewClaimRecord.claimed_by), ~_token_usable(now)
    )
    return exists(dead)


def _reviewed_since(
    session: Session, since: datetime, agent: str | None, scenario_id: str | None
) -> int:
    """Reviews people finished since ``since``. A regrade that carries a finished review
    onto its grading copies its row as it is (``storage.regrade.lifecycle``): one review
    is one ``(submission, done_at, done_by)``, however many gradings hold a copy of it."""
    reviews = (
        select(
            col(GradingRecord.submission_id),
            col(ReviewClaimRecord.done_at),
            col(ReviewClaimRecord.done_by),
        )
        .select_from(ReviewClaimRecord)
        .join(GradingRecord, col(GradingRecord.id) == col(ReviewClaimRecord.grading_id))
        .join(SubmissionRecord, col(SubmissionRecord.id) == col(GradingRecord.submission_id))
        .where(col(ReviewClaimRecord.done_at) >= since)
        .distinct()
    )
    if agent is not None:
        reviews = reviews.where(col(SubmissionRecord.agent) == agent)
    if scenario_id is not None:
        reviews = reviews.where(col(SubmissionRecord.scenario_id) == scenario_id)
    query = select(func.count()).select_from(reviews.subquery())
    return int(session.execute(query).scalar_one())
