"""The adjudicator's use cases: read, claim, label, override a grading, and its history.

The HTTP routes and the workbench pages call these; the principal is always the caller,
so nobody can act in another's name. A grading the principal may not read does not
exist for it (:class:`storage.NotFound`, never a hint that the id is taken).

Why this module is long: it is the one home of what an adjudicator does to a grading
(the review queue, claims, skips and assignments, labels, overrides, history); split,
each part would import the same visibility and presentation rules from the others.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from sqlalchemy import select
from sqlmodel import col

from api.adjudication.label_queries import LabelQueries
from api.adjudication.override_queries import OverrideQueries
from api.adjudication.review_queries import (
    Assignee,
    QueueCounts,
    QueueFilter,
    QueuePage,
    ReviewItem,
    ReviewQueries,
    ReviewState,
)
from api.adjudication.tag_queries import TagQueries
from api.service.errors import InvalidRequest
from api.service.presenters import full_grading, present_gradings, rubric_shown
from api.service.principal import Principal
from api.service.schemas import GradingPublic, GradingRead, OverrideCreate
from api.service.services import Services
from api.service.visibility import readable_grading, readable_in
from judge.masking import mask_passwords
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric
from storage import GradingView
from storage.audit import COVERS, ROWS
from storage.claims import graded_ground_truth
from storage.database import AuditBatch
from storage.errors import Conflict, InvalidCursor, PreconditionFailed
from storage.gradings import overrides_of
from storage.regrade.tables import RegradeJobRecord
from storage.review_tables import (
    FailureTagRecord,
    HumanLabelRecord,
    ReviewClaimRecord,
    TagVocabularyRecord,
)
from storage.tables import RESULT_STATUSES, GradingRecord

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = [
    "SKIP_NOTE_LIMIT",
    "GradingPageParts",
    "GradingPair",
    "PresentedQueue",
    "WalkStep",
    "append_override",
    "assign_review",
    "assignees",
    "claim_review",
    "define_tag",
    "finish_review",
    "graded_truth_shown",
    "grading_history",
    "grading_page_parts",
    "grading_pair",
    "history_in",
    "label_grading",
    "override_grading",
    "own_blind_labels",
    "presented_review_items",
    "queue_filter",
    "related_gradings",
    "related_in",
    "review_items",
    "reviewed_today",
    "skip_review",
    "tag_grading",
    "tag_vocabulary",
    "untag_grading",
    "walk_step",
]

#: the longest note a skip may carry, in characters
SKIP_NOTE_LIMIT = 2000


async def review_items(
    services: Services,
    principal: Principal,
    *,
    agent: str | None = None,
    scenario_id: str | None = None,
    reason: str | None = None,
    assigned_to_me: bool = False,
    cursor: str | None = None,
    limit: int = 50,
) -> QueuePage:
    """A page of the review queue as ``principal`` sees it, most urgent first
    (``assigned_to_me``: only the items assigned to ``principal``); ``cursor`` (a page's
    ``next_cursor``) continues after that page."""
    _check_reason(reason)
    db = services.store.db
    filters = QueueFilter(
        agent=agent,
        scenario_id=scenario_id,
        reason=reason,
        assigned_to=principal.id if assigned_to_me else None,
    )
    return await db.run_read(
        ReviewQueries(db).read_page,
        principal_id=principal.id,
        filters=filters,
        after=cursor,
        limit=limit,
    )


@dataclass(frozen=True)
class PresentedQueue:
    """The first items of a (filtered) review queue, each with its grading object, and
    how many items the whole queue holds, in all and per reason, read in one snapshot."""

    items: list[tuple[GradingRead, ReviewItem]]
    counts: QueueCounts


async def presented_review_items(
    services: Services, principal: Principal, filters: QueueFilter, *, limit: int = 50
) -> PresentedQueue:
    """The first ``limit`` items of the review queue as ``principal`` sees it under
    ``filters`` (:func:`queue_filter`), each with its grading object, and the counts of
    the whole queue under the same filters, read in one snapshot (the queue page)."""
    return await services.store.db.run_read(_presented_items, services, principal, filters, limit)


def queue_filter(
    principal: Principal,
    *,
    agent: str | None = None,
    scenario_id: str | None = None,
    reason: str | None = None,
    assigned_to_me: bool = False,
    model: str | None = None,
    judge: str | None = None,
    provisional: bool | None = None,
) -> QueueFilter:
    """The queue's filter as the workbench's pages take it (``assigned_to_me``: the items
    assigned to ``principal``; the others as :class:`QueueFilter` takes them);
    InvalidRequest naming ``reason`` for an unknown one."""
    _check_reason(reason)
    return QueueFilter(
        agent=agent,
        scenario_id=scenario_id,
        reason=reason,
        assigned_to=principal.id if assigned_to_me else None,
        model=model,
        judge=judge,
        provisional=provisional,
    )


@dataclass(frozen=True)
class WalkStep:
    """Where a walk through the queue goes next: the item, its place in the queue's
    order (``key``), and how many items are queued behind it."""

    grading_id: str
    key: str
    left: int


async def walk_step(
    services: Services,
    principal: Principal,
    filters: QueueFilter,
    *,
    key: str | None,
    after: str | None,
) -> tuple[WalkStep | None, str | None]:
    """The next item of a walk through the filtered queue after the item ``after``, whose
    place in the queue's order was ``key`` when it was opened (None, or a key this
    service did not sign: from the queue's start), however far down the queue it is and
    however the items before it moved meanwhile: the first item queued behind that
    place, the item ``after`` itself excluded (also where a promoted regrade replaced
    its grading meanwhile). Also the grading the item walked past is under now (``after``,
    or the one a promoted regrade put in its place), wherever that grading sits now: in
    another tier or verdict, outside the walk's filter, or out of the queue (None
    without ``after`` or for an unknown one). One snapshot; None at the queue's end."""
    return await services.store.db.run_read(_walk_step, services, principal, filters, key, after)


def _walk_step(
    session: Session,
    services: Services,
    principal: Principal,
    filters: QueueFilter,
    key: str | None,
    after: str | None,
) -> tuple[WalkStep | None, str | None]:
    queries = ReviewQueries(services.store.db)
    try:
        page = queries.read_page(
            session, principal_id=principal.id, filters=filters, starting_at=key, limit=2
        )
    except InvalidCursor:  # an edited address: walk from the start
        page = queries.read_page(session, principal_id=principal.id, filters=filters, limit=2)
    left_item = session.get(GradingRecord, after) if after is not None else None
    # the item walked past, by its submission: a promoted regrade's grading is that item
    walked = left_item.submission_id if left_item is not None else None
    passed = _current_grading(session, walked) if walked is not None else None
    following = [item for item in page.items if item.submission.id != walked]
    if not following:
        return None, passed
    found = following[0]
    left = queries.read_counts(
        session, principal_id=principal.id, filters=filters, after=found.key
    ).total
    return WalkStep(grading_id=found.grading.id, key=found.key, left=left), passed


def _current_grading(session: Session, submission_id: str) -> str | None:
    """The id of the submission's grading in force (a promoted regrade's, once one
    replaced it), wherever the queue holds it, or None."""
    query = (
        select(col(GradingRecord.id))
        .where(
            col(GradingRecord.submission_id) == submission_id,
            col(GradingRecord.is_current).is_(True),
        )
        .order_by(col(GradingRecord.created_at).desc())
    )
    found: str | None = session.execute(query).scalars().first()
    return found


def _presented_items(
    session: Session,
    services: Services,
    principal: Principal,
    filters: QueueFilter,
    limit: int,
) -> PresentedQueue:
    queries = ReviewQueries(services.store.db)
    counts = queries.read_counts(session, principal_id=principal.id, filters=filters)
    page = queries.read_page(session, principal_id=principal.id, filters=filters, limit=limit)
    views = [
        GradingView(grading=i.grading, answers=i.answers, submission=i.submission)
        for i in page.items
    ]
    presented = present_gradings(session, services, views, principal)
    return PresentedQueue(items=list(zip(presented, page.items, strict=True)), counts=counts)


def _check_reason(reason: str | None) -> None:
    """InvalidRequest naming ``reason`` unless it is a review reason (or None)."""
    known = [r.value for r in ReviewReason]
    if reason is not None and reason not in known:
        raise InvalidRequest(f"reason must be one of {', '.join(known)}", field="reason")


async def reviewed_today(
    services: Services, *, agent: str | None = None, scenario_id: str | None = None
) -> int:
    """Reviews finished since midnight UTC (of one agent's or one scenario's gradings)."""
    now = services.store.db.clock()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return await ReviewQueries(services.store.db).reviewed_since(
        midnight, agent=agent, scenario_id=scenario_id
    )


async def claim_review(
    services: Services,
    principal: Principal,
    grading_id: str,
    *,
    minutes: float | None = None,
    reopen: bool = True,
) -> ReviewClaimRecord:
    """Hold an item for ``minutes`` (the configured default when None); Conflict while
    another adjudicator holds it, :class:`storage.errors.Superseded` naming the grading in
    force for one a promoted regrade replaced. Returns the claim. ``reopen`` False (a
    page opened): a finished item stays out of the queue, unclaimed (its ``done_at`` says
    so); a held pass is never finished while held, and is claimed."""
    await readable_grading(services, principal, grading_id)
    return await ReviewQueries(services.store.db).claim(
        grading_id,
        principal_id=principal.id,
        principal_name=principal.name,
        minutes=minutes or services.settings.review_claim_minutes,
        reopen=reopen,
    )


async def finish_review(services: Services, principal: Principal, grading_id: str) -> None:
    """The item leaves the queue; :class:`storage.errors.Superseded` naming the grading in
    force for a grading a promoted regrade replaced (the queue holds that one)."""
    await readable_grading(services, principal, grading_id)
    await ReviewQueries(services.store.db).finish(grading_id, principal_id=principal.id)


async def skip_review(
    services: Services, principal: Principal, grading_id: str, *, note: str | None = None
) -> ReviewState:
    """Skip the item in ``principal``'s name with an optional ``note`` for the next
    adjudicator (InvalidRequest naming ``note`` past ``SKIP_NOTE_LIMIT`` characters);
    a claim ``principal`` held on it is given back. Returns the item's review row and who
    holds it. :class:`storage.errors.Superseded` for a grading a promoted regrade replaced."""
    text = (note or "").strip()
    if len(text) > SKIP_NOTE_LIMIT:
        raise InvalidRequest(f"note: at most {SKIP_NOTE_LIMIT} characters", field="note")
    await readable_grading(services, principal, grading_id)
    return await ReviewQueries(services.store.db).skip(
        grading_id, principal_id=principal.id, principal_name=principal.name, note=text or None
    )


async def release_review(services: Services, principal: Principal, grading_id: str) -> bool:
    """Give back the claim ``principal`` holds on an item it walked past (nothing when it
    holds none); returns whether a claim was given back."""
    return await ReviewQueries(services.store.db).release(grading_id, principal_id=principal.id)


async def assign_review(
    services: Services, principal: Principal, grading_id: str, assignee: str | None
) -> ReviewState:
    """Assign the item to an adjudicator or admin named by token id or name, or unassign
    it (None), in ``principal``'s name; :class:`storage.errors.InvalidReview` naming
    ``assignee`` when nobody who may review answers to it, :class:`storage.errors.Superseded`
    for a grading a promoted regrade replaced. Returns the item's review row and who holds
    it."""
    wanted = assignee.strip() if assignee is not None else None
    if wanted == "":
        raise InvalidRequest("assignee: give a token id or name, or null", field="assignee")
    await readable_grading(services, principal, grading_id)
    return await ReviewQueries(services.store.db).assign(
        grading_id, wanted, principal_id=principal.id
    )


async def assignees(services: Services) -> list[Assignee]:
    """Everyone an item can be assigned to, by name."""
    return await ReviewQueries(services.store.db).assignees()


async def label_grading(
    services: Services,
    principal: Principal,
    grading_id: str,
    *,
    answers: dict[str, bool],
    verdict: Literal["pass", "fail"] | None = None,
) -> GradingView:
    """Store the principal's own answers as human labels, finish its review, and return
    the grading as it stands now: one transaction, so a review that cannot finish (a
    held pass, which only a verdict override decides) stores no label either. Conflict
    for a grading without a result (pending, or a cancelled regrade item: its review
    would end before the judge's result is in), and
    Superseded for a grading a promoted regrade replaced (the queue holds the grading in
    force, which the message names)."""
    db = services.store.db

    def label(session: Session) -> GradingView:
        view = readable_in(session, services, principal, grading_id)
        if view.grading.status not in RESULT_STATUSES:  # nothing to compare, no review to end
            raise Conflict(
                f"a {view.grading.status} grading has no result to label: label it once it has one"
            )
        rubric = rubric_shown(session, services, view)
        question_ids = (
            [q.id for q in rubric.questions] if rubric else [a.question_id for a in view.answers]
        )
        # the labels written and the review closed before either is audited: rows
        # first, the audit chain's lock last (storage.database)
        audits = AuditBatch()
        LabelQueries(db).add_in(
            session,
            grading_id,
            question_ids=question_ids,
            answers=answers,
            verdict=verdict,
            author_id=principal.id,
            author_name=principal.name,
            into=audits,
        )
        ReviewQueries(db).finish_in(session, grading_id, principal_id=principal.id, into=audits)
        db.audit_many(session, audits.events, audits.covers, audits.rows)
        return readable_in(session, services, principal, grading_id)

    return await db.run(label)


async def own_blind_labels(
    services: Services, principal: Principal, grading_id: str
) -> tuple[GradingView, list[HumanLabelRecord]]:
    """The grading as ``principal`` may read it, and the blind labels ``principal`` gave
    it (empty: none yet), in one snapshot."""

    def read(session: Session) -> tuple[GradingView, list[HumanLabelRecord]]:
        view = readable_in(session, services, principal, grading_id)
        return view, LabelQueries.blind_in(session, grading_id, principal.id)

    return await services.store.db.run_read(read)


async def override_grading(
    services: Services,
    principal: Principal,
    grading_id: str,
    request: OverrideCreate,
    *,
    expected_revision: int,
) -> GradingPublic:
    """Append an override in ``principal``'s name to the grading at ``expected_revision``
    (:class:`storage.PreconditionFailed` when it moved on; :class:`storage.errors.Superseded`
    for an answer or verdict on a grading a promoted regrade replaced) and return the
    grading object: read, checked, written, audited and read back in one transaction."""
    _check_override(request)

    def override(session: Session) -> GradingPublic:
        view = _append_override(
            session, services, principal, grading_id, request, expected_revision
        )
        # ``view`` holds the grading as the override left it (the same objects, written)
        return full_grading(present_gradings(session, services, [view], principal)[0])

    return await services.store.db.run(override)


async def append_override(
    services: Services,
    principal: Principal,
    grading_id: str,
    request: OverrideCreate,
    *,
    expected_revision: int,
    seen: Collection[str] | None = None,
) -> None:
    """``override_grading`` for a caller that shows the grading afresh (the page's form,
    which redirects to the page): the same transaction without the grading object read
    back. ``seen``: the ids of the overrides the page showed at ``expected_revision``.
    When the only override appended since is this very one in ``principal``'s name (the
    same form sent twice, as by a double click), it is saved already: nothing is
    appended again and no :class:`storage.PreconditionFailed` is raised."""
    _check_override(request)
    await services.store.db.run(
        _append_once, services, principal, grading_id, request, expected_revision, seen
    )


def _append_once(
    session: Session,
    services: Services,
    principal: Principal,
    grading_id: str,
    request: OverrideCreate,
    expected_revision: int,
    seen: Collection[str] | None,
) -> None:
    """``_append_override``; on a stale revision, nothing when the only override
    appended since the page (``seen``) is this very one (see ``append_override``)."""
    try:
        _append_override(session, services, principal, grading_id, request, expected_revision)
    except PreconditionFailed:
        if seen is None or not _saved_already(session, principal, grading_id, request, seen):
            raise


def _saved_already(
    session: Session,
    principal: Principal,
    grading_id: str,
    request: OverrideCreate,
    seen: Collection[str],
) -> bool:
    """The one override of the grading not in ``seen`` is ``request``, by ``principal``."""
    added = [o for o in overrides_of(session, [grading_id]).get(grading_id, []) if o.id not in seen]
    if len(added) != 1:
        return False
    made = added[0]
    answer = None if request.answer is None else request.answer == "yes"
    return (
        made.author_id == principal.id
        and made.kind == request.kind
        and made.question_id == request.question_id
        and made.answer == answer
        and made.verdict == request.verdict
        and made.withdraws == request.withdraw
        and made.reason == request.reason
    )


def _check_override(request: OverrideCreate) -> None:
    problem = request.kind_problem()
    if problem:
        raise InvalidRequest(problem[1], field=problem[0])


def _append_override(
    session: Session,
    services: Services,
    principal: Principal,
    grading_id: str,
    request: OverrideCreate,
    expected_revision: int,
) -> GradingView:
    """Check and append the override; the grading as it left it."""
    view = readable_in(session, services, principal, grading_id)
    g = view.grading
    # an imported SREGym verdict (no stored rubric version) is adjudicated against the
    # current version that asks every question it answered, as its page shows it
    rubric = rubric_shown(session, services, view)
    if rubric is None:
        raise Conflict(f"rubric {g.rubric_id}@{g.rubric_version} is unknown")
    OverrideQueries(services.store.db).add_in(
        session,
        grading_id,
        view=view,
        rubric=rubric,
        expected_revision=expected_revision,
        kind=request.kind,
        reason=request.reason,
        author_id=principal.id,
        author_name=principal.name,
        question_id=request.question_id,
        answer=None if request.answer is None else request.answer == "yes",
        verdict=request.verdict,
        withdraws=request.withdraw,
    )
    return view


async def grading_history(
    services: Services, principal: Principal, grading_id: str
) -> list[dict[str, Any]]:
    """Every audit event of the grading and its submission, oldest first, each judge call
    in full (prompt, reply, parameters, tokens)."""
    return await services.store.db.run_read(history_in, services, principal, grading_id)


def history_in(
    session: Session, services: Services, principal: Principal, grading_id: str
) -> list[dict[str, Any]]:
    """``grading_history`` inside a use case's ``session``."""
    readable_in(session, services, principal, grading_id)
    events = services.store.gradings.read_history(session, grading_id)
    calls = {c.id: c for c in services.store.gradings.read_judge_calls(session, grading_id)}
    # people by their names: an actor that is a token is shown by the token's name
    names = services.store.tokens.read_names(session, (e.actor for e in events))
    items = []
    for event in events:
        item: dict[str, Any] = {
            "seq": event.seq,
            "at": event.created_at,
            "event": event.event,
            "actor": event.actor,
            "actor_name": names.get(event.actor, event.actor),
            "payload": _payload_shown(event.payload, grading_id),
            "hash": event.hash,
        }
        call = calls.get(str(event.payload.get("call_id", "")))
        if event.event == "judge.call" and call is not None:
            item["call"] = {
                "purpose": call.purpose,
                "backend": call.backend,
                "model": call.model,
                "messages": call.messages,
                "params": call.params,
                "response_text": call.response_text,
                "fingerprint": call.fingerprint,
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "latency_ms": call.latency_ms,
                "attempts": call.attempts,
                "error_code": call.error_code,
            }
        items.append(item)
    return items


def _payload_shown(payload: dict[str, Any], grading_id: str) -> dict[str, Any]:
    """An event's payload as the grading's history shows it: without the records'
    digests (they name their columns' hashes: the chain's business only), of the
    gradings' digests only this grading's (a regrade job's event covers all its items),
    and with the credentials of every URL in it masked (a judge's base URL, as events
    logged before they were masked there hold it)."""
    shown = {k: _masked(v) for k, v in payload.items() if k != ROWS}
    covers = shown.get(COVERS)
    if isinstance(covers, dict):
        shown[COVERS] = {k: v for k, v in covers.items() if k == grading_id}
    return shown


def _masked(value: Any) -> Any:
    """``value`` with the credentials of the URLs in its strings masked, at any depth."""
    if isinstance(value, str):
        return mask_passwords(value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


async def related_gradings(
    services: Services, principal: Principal, grading_id: str
) -> list[GradingView]:
    """The other gradings of the same submission (earlier or shadow regrades, other judges
    or rubrics), oldest first."""
    return await services.store.db.run_read(related_in, services, principal, grading_id)


def related_in(
    session: Session, services: Services, principal: Principal, grading_id: str
) -> list[GradingView]:
    """``related_gradings`` inside a use case's ``session``."""
    view = readable_in(session, services, principal, grading_id)
    siblings = services.store.gradings.read_of_submission(session, view.submission.id)
    return [v for v in siblings if v.grading.id != grading_id]


@dataclass(frozen=True)
class GradingPageParts:
    """Everything one grading's page shows, read in one snapshot."""

    view: GradingView
    #: the grading object as ``principal`` may see it
    grading: GradingRead
    rubric: Rubric | None
    #: the other gradings of the submission, each with its grading object
    related: list[tuple[GradingRead, GradingView]]
    #: the audit history (adjudicators only; else empty)
    history: list[dict[str, Any]]
    #: the failure-tag vocabulary (adjudicators only; else empty)
    vocabulary: list[TagVocabularyRecord]
    #: reasons an override form offers: the principal's last ones, then the vocabulary's
    canned_reasons: list[str]
    #: the item's review row: claim, last skip and its note, assignee (adjudicators only)
    review: ReviewClaimRecord | None = None
    #: the ground truth the grading is judged against (its scenario version's text),
    #: for those who may see it; else None
    ground_truth: str | None = None
    #: the mode (``shadow`` or ``promote``) of each regrade job that made one of the
    #: ``related`` gradings, by job id
    regrade_modes: dict[str, str] = field(default_factory=dict)


async def grading_page_parts(
    services: Services, principal: Principal, grading_id: str
) -> GradingPageParts:
    """What the grading page shows, in one snapshot read in one worker-thread hop."""
    return await services.store.db.run_read(_page_parts, services, principal, grading_id)


def _page_parts(
    session: Session, services: Services, principal: Principal, grading_id: str
) -> GradingPageParts:
    adjudicator = principal.at_least("adjudicator")
    view = readable_in(session, services, principal, grading_id)
    siblings = related_in(session, services, principal, grading_id)
    presented = present_gradings(session, services, [view, *siblings], principal)
    vocabulary = TagQueries.read_vocabulary(session) if adjudicator else []
    recent = OverrideQueries.read_recent_reasons(session, principal.id) if adjudicator else []
    canned = [
        *recent,
        *(f"{v.tag}: {v.description}" if v.description else v.tag for v in vocabulary),
    ]
    return GradingPageParts(
        view=view,
        grading=presented[0],
        rubric=rubric_shown(session, services, view),
        related=list(zip(presented[1:], siblings, strict=True)),
        history=history_in(session, services, principal, grading_id) if adjudicator else [],
        vocabulary=vocabulary,
        canned_reasons=list(dict.fromkeys(canned)),
        review=session.get(ReviewClaimRecord, grading_id) if adjudicator else None,
        ground_truth=graded_truth_shown(session, view, presented[0]),
        regrade_modes=_regrade_modes(session, siblings),
    )


def _regrade_modes(session: Session, views: Sequence[GradingView]) -> dict[str, str]:
    """The mode of each regrade job that made one of ``views``' gradings, by job id."""
    jobs = {v.grading.regrade_job_id for v in views if v.grading.regrade_job_id}
    if not jobs:
        return {}
    query = select(col(RegradeJobRecord.id), col(RegradeJobRecord.mode)).where(
        col(RegradeJobRecord.id).in_(jobs)
    )
    return {job_id: mode for job_id, mode in session.execute(query)}


def graded_truth_shown(session: Session, view: GradingView, grading: GradingRead) -> str | None:
    """The ground truth ``view``'s grading is judged against, when the grading object
    ``grading`` (as its reader may see it) shows a ground truth at all."""
    if getattr(grading.submission, "ground_truth", None) is None:
        return None
    return graded_ground_truth(session, view.grading, view.submission)


@dataclass(frozen=True)
class GradingPair:
    """Two gradings of one submission as ``principal`` may read them, with their rubrics."""

    first: GradingRead
    second: GradingRead
    first_rubric: Rubric | None
    second_rubric: Rubric | None


async def grading_pair(
    services: Services, principal: Principal, first_id: str, second_id: str
) -> GradingPair:
    """Two gradings of one attempt (the same submission: another judge, rubric version or
    a regrade), read in one snapshot; NotFound for one ``principal`` may not read, Conflict
    when they grade different submissions."""
    return await services.store.db.run_read(_pair, services, principal, first_id, second_id)


def _pair(
    session: Session, services: Services, principal: Principal, first_id: str, second_id: str
) -> GradingPair:
    views = [readable_in(session, services, principal, i) for i in (first_id, second_id)]
    if views[0].submission.id != views[1].submission.id:
        raise Conflict("these gradings are of different submissions; compare gradings of one")
    first, second = present_gradings(session, services, views, principal)
    rubrics = [
        services.rubrics.resolve_in(session, v.grading.rubric_id, v.grading.rubric_version)
        for v in views
    ]
    return GradingPair(first, second, rubrics[0], rubrics[1])


async def tag_grading(
    services: Services, principal: Principal, grading_id: str, *, tag: str, note: str = ""
) -> FailureTagRecord:
    """Tag what the agent got wrong, in ``principal``'s name; the tag must be in the
    vocabulary (:class:`storage.errors.InvalidReview` naming ``tag`` otherwise), the
    grading in force (:class:`storage.errors.Superseded` for one a promote replaced),
    and not ``principal``'s tag with this note in force there already
    (:class:`storage.errors.Conflict` naming ``tag``)."""
    await readable_grading(services, principal, grading_id)
    return await TagQueries(services.store.db).add(
        grading_id, tag=tag, note=note, author_id=principal.id, author_name=principal.name
    )


async def untag_grading(
    services: Services, principal: Principal, grading_id: str, tag_id: int
) -> None:
    """Remove a tag (kept in the audit log); :class:`storage.errors.Superseded` on a
    grading a promote replaced (its copy on the grading in force is the one to remove)."""
    await readable_grading(services, principal, grading_id)
    await TagQueries(services.store.db).remove(grading_id, tag_id, actor=principal.id)


async def tag_vocabulary(services: Services) -> list[TagVocabularyRecord]:
    """The failure-tag vocabulary adjudicators tag with."""
    return await TagQueries(services.store.db).vocabulary()


async def define_tag(
    services: Services, principal: Principal, tag: str, *, description: str
) -> TagVocabularyRecord:
    """Extend the vocabulary in ``principal``'s name (admins)."""
    return await TagQueries(services.store.db).add_vocabulary(
        tag, description=description, actor=principal.id
    )
