"""A regrade job's life in the caller's transaction: held back, started, promoted, ended.

Items of paused or cancelled jobs are not claimed. When items are completed (inside
the queue's ``complete_many`` transaction), the previous grading's human overrides are
carried over, a ``promote`` job makes the new grading current (the old one is kept,
superseded; the new one takes its place in the list of gradings), and the job ends
when no item is pending any more. An item that goes back to pending without a verdict
(deferred, its lease given back, or its lease run out with a killed worker, whose
loss is audited: ``storage.lost_workers``) in a job cancelled while it was with the
judge is cancelled like the job's other unfinished items. The functions take the
database handle and the caller's session: the queue calls them in its own transactions,
the regrade feature's job queries when a job is changed.

Why this module is long: completing an item is one transaction whose steps (the locks,
the carry, the promotion, the review and tags that follow, the job's end) keep one lock
order, which is kept in one place only while they stay together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import BindParameter, Select, and_, func, or_, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.rubric import Rubric
from storage.database import AuditBatch, Database
from storage.lost_workers import workers_lost
from storage.regrade.batch_tables import RegradeEngineRecord
from storage.regrade.carry import Carried, carry_overrides
from storage.regrade.progress import job_progress
from storage.regrade.tables import RegradeJobRecord
from storage.review_tables import FailureTagRecord, OverrideRecord, ReviewClaimRecord
from storage.tables import GradingRecord, SubmissionRecord

__all__ = [
    "GRADING_LOCK_ORDER",
    "HELD_BACK_STATES",
    "ITEM_CANCELLED",
    "abandoned_items",
    "cancel_abandoned",
    "cancel_given_back",
    "end_job",
    "finish_if_drained",
    "items_completed",
    "lock_items",
    "locked_job",
    "mark_jobs_started",
    "not_held_back",
]

#: items of jobs in these states are not claimed
HELD_BACK_STATES = ("paused", "cancelled")
#: the audit event of an item cancelled as it came back unfinished (``cancel_given_back``)
ITEM_CANCELLED = "grading.cancelled"
#: the order in which a transaction locks several graded gradings (a regrade batch those
#: its items follow and promote over, a withdrawal the grading withdrawn on and those
#: its copies lie on): oldest first, by creation time, which never changes (``lock_items``)
GRADING_LOCK_ORDER = (col(GradingRecord.created_at), col(GradingRecord.id))


def not_held_back() -> Any:
    """A WHERE clause: the grading is no item of a paused or cancelled job, nor of a job
    whose batch engine has not got its results yet (``storage.regrade.batch_tables``)."""
    held = select(col(RegradeJobRecord.id)).where(col(RegradeJobRecord.state).in_(HELD_BACK_STATES))
    waiting = select(col(RegradeEngineRecord.job_id)).where(
        col(RegradeEngineRecord.state) != "grading"
    )
    return or_(
        col(GradingRecord.regrade_job_id).is_(None),
        col(GradingRecord.regrade_job_id).not_in(held.union_all(waiting)),
    )


def abandoned_items(now: datetime | BindParameter[datetime]) -> Select[GradingRecord]:
    """The items of cancelled jobs left pending with a lease that ran out before ``now``:
    their worker was killed while the cancel left them alone, so no path gives them back
    (the queue cancels them: ``cancel_abandoned``)."""
    cancelled = select(col(RegradeJobRecord.id)).where(col(RegradeJobRecord.state) == "cancelled")
    return select(GradingRecord).where(
        col(GradingRecord.regrade_job_id).in_(cancelled),
        col(GradingRecord.status) == "pending",
        col(GradingRecord.lease_expires_at) < now,
    )


def mark_jobs_started(db: Database, session: Session, job_ids: set[str], worker_id: str) -> None:
    """Queued jobs with a claimed item are running from now on, each audited once as
    ``regrade_job.started`` by the worker that claimed it (no-op for none)."""
    if not job_ids:  # live submissions only: no statement at all
        return
    started = session.execute(
        update(RegradeJobRecord)
        .where(col(RegradeJobRecord.id).in_(job_ids), col(RegradeJobRecord.state) == "queued")
        .values(state="running", started_at=db.clock())
        .returning(col(RegradeJobRecord.id))
        .execution_options(synchronize_session=False)
    ).scalars()
    events = [
        {
            "event": "regrade_job.started",
            "entity_type": "regrade_job",
            "entity_id": job_id,
            "actor": worker_id,
            "payload": {"job_id": job_id, "state": "running"},
        }
        for job_id in sorted(started)
    ]
    if events:
        db.audit_many(session, events)


def locked_job(db: Database, session: Session, job_id: str) -> RegradeJobRecord | None:
    """The job, row-locked on PostgreSQL, or None."""
    query = select(RegradeJobRecord).where(col(RegradeJobRecord.id) == job_id)
    if db.postgres:
        query = query.with_for_update()
    return session.execute(query).scalar_one_or_none()


def lock_items(
    db: Database, session: Session, gradings: Sequence[Mapping[str, Any]]
) -> dict[str, RegradeJobRecord]:
    """The jobs of the regrade items among these gradings (their column values as
    written), by id; none for live gradings.

    On PostgreSQL it row-locks what completing the items touches besides them, before
    the verdicts' audit takes the chain's lock (rows first, the audit chain's lock last:
    ``storage.database``), in this order:

    1. the jobs (``_locked_jobs``);
    2. for the graded items of ``promote`` jobs, their submissions' rows (``FOR NO KEY
       UPDATE``), which every promotion takes first, so the promotions of one submission
       run one after the other. Without it, a promote that waited for the current
       grading's row while another promote of the submission committed would lock only
       the grading it had read (its statement's snapshot is older than the wait) and
       find the new current one only after its audit, then wait for an override of it
       that holds its row while it waits to audit. A statement run once this lock is
       held sees the current grading as it stands. ``NO KEY UPDATE``, not ``UPDATE``:
       the foreign key checks of rows written under the submission (``FOR KEY SHARE``)
       do not wait for it, and nothing else locks or changes a submission's row;
    3. the gradings, in one order: every item's previous grading, and the current
       gradings of those submissions (promoted over), oldest first (``_lock_gradings``).

    A grading promoted over is written: ``FOR NO KEY UPDATE``. A previous grading is only
    followed: an item's row written again after the audit (promoted, or carrying
    overrides) makes PostgreSQL check its foreign keys again, which takes ``FOR KEY
    SHARE`` on the previous grading, and after the audit that would wait for an
    override made or withdrawn on it, which holds its row while it waits to audit. So
    that lock is taken here, before the audit; held from then on, no override of the
    previous grading commits until this transaction does, and the overrides it carries
    are the ones it read. ``KEY SHARE`` and no stronger: the gradings a new job's items
    follow are locked so by their foreign keys, in the job's own order, and the
    batches of other jobs that follow the same grading take it alike; none of them
    waits for another, where a stronger lock would make them queue, and deadlock with
    a job being created.
    """
    items = [g for g in gradings if g["regrade_job_id"] is not None]
    if not items:
        return {}
    jobs = _locked_jobs(db, session, {g["regrade_job_id"] for g in items})
    if not db.postgres:
        return jobs
    promoted = {g["id"] for g in items if _promotes(jobs.get(g["regrade_job_id"]), g["status"])}
    submissions = sorted({g["submission_id"] for g in items if g["id"] in promoted})
    if submissions:
        session.execute(
            select(col(SubmissionRecord.id))
            .where(col(SubmissionRecord.id).in_(submissions))
            .order_by(col(SubmissionRecord.id))
            .with_for_update(key_share=True)
        ).all()
    previous = {g["previous_grading_id"] for g in items if g["previous_grading_id"]}
    if not submissions and not previous:
        return jobs
    replaced = and_(
        col(GradingRecord.submission_id).in_(submissions),
        col(GradingRecord.is_current).is_(True),
        col(GradingRecord.id).not_in(promoted),
    )
    # read after the submissions' rows are locked: no promotion changes them meanwhile
    touched = session.execute(
        select(col(GradingRecord.id), replaced)
        .where(or_(col(GradingRecord.id).in_(previous), replaced))
        .order_by(*GRADING_LOCK_ORDER)
    ).all()
    _lock_gradings(session, [(grading_id, bool(written)) for grading_id, written in touched])
    return jobs


def _lock_gradings(session: Session, gradings: Sequence[tuple[str, bool]]) -> None:
    """Row-lock the gradings in the order given (``GRADING_LOCK_ORDER``), each once:
    ``FOR NO KEY UPDATE`` where its flag is set (it is written), ``FOR KEY SHARE`` otherwise
    (it is followed); one statement per run of the same lock.

    ``FOR NO KEY UPDATE`` rather than ``FOR UPDATE`` for a grading written: a promotion
    changes no column a row points at, and a job being created over the same
    submissions, whose items' foreign keys take ``FOR KEY SHARE`` on the gradings they
    follow in the job's own order, does not wait for it (nor it for them).

    One order for every grading, whatever it is to this batch: the grading one batch
    follows is the one another promotes over, and two batches that took them in two
    orders (the gradings they follow in one, those they promote over in another) could
    each hold a row the other waits for. Oldest first, as a withdrawal locks the grading
    it withdraws on together with the gradings its copies lie on
    (``api.adjudication.override_queries``), whichever of them is older (a promote's
    item, made when its job was, can be older than the grading it carries from): a
    batch that follows one and promotes over another waits for the withdrawal at the
    older, holding neither. A grading both followed and promoted over in one batch takes
    the stronger lock alone: holding the weaker while asking for the stronger would
    queue behind a writer that came between.
    """
    for written, run in groupby(gradings, key=itemgetter(1)):
        ids = [grading_id for grading_id, _ in run]
        query = select(col(GradingRecord.id)).where(col(GradingRecord.id).in_(ids))
        query = query.order_by(*GRADING_LOCK_ORDER)
        if written:  # FOR NO KEY UPDATE: a promotion changes no key a row points at
            session.execute(query.with_for_update(key_share=True)).all()
        else:
            session.execute(query.with_for_update(read=True, key_share=True)).all()


def _locked_jobs(db: Database, session: Session, job_ids: set[str]) -> dict[str, RegradeJobRecord]:
    """The jobs by id, row-locked on PostgreSQL in id order (as every transaction that
    locks several takes them), after the caller's item rows: a job's row is the one a
    pause or cancel holds while it changes the job's items."""
    query = (
        select(RegradeJobRecord)
        .where(col(RegradeJobRecord.id).in_(job_ids))
        .order_by(col(RegradeJobRecord.id))
    )
    if db.postgres:
        query = query.with_for_update()
    return {job.id: job for job in session.execute(query).scalars()}


def cancel_abandoned(
    db: Database,
    session: Session,
    items: Sequence[GradingRecord],
    actor: str,
    *,
    into: AuditBatch,
) -> list[str]:
    """Cancel the abandoned items (``abandoned_items``, row-locked by the caller) whose
    job is still cancelled, as ``cancel_given_back`` does; their ids. The worker whose
    lease ran out on each was lost while it held it: audited ``into`` the batch before
    the item's cancel (``storage.lost_workers``), and the lease's expiry is kept, so the
    claim that takes the item after a resume counts that loss."""
    return cancel_given_back(
        db, session, {g.id: g.regrade_job_id for g in items}, actor, into=into, lost=items
    )


def cancel_given_back(
    db: Database,
    session: Session,
    items: Mapping[str, str | None],
    actor: str,
    *,
    into: AuditBatch | None = None,
    lost: Sequence[GradingRecord] = (),
) -> list[str]:
    """Cancel those of these gradings, just put back to pending without a verdict, whose
    regrade job is cancelled; their ids.

    A cancel leaves alone the items a worker holds a live lease on (they are with the
    judge and finish, as under a pause). One that does not finish (deferred, its lease
    given back, or its worker killed: ``abandoned_items``) would otherwise stay pending
    for ever: never claimed, its job never drained, counted in the queue's depth. So
    every path that gives a grading back unfinished, and the queue's claims for the
    leases that ran out, call this in their own transaction: it becomes ``cancelled``
    like the job's other unfinished items, and comes back with resume.

    ``items``: grading id -> its regrade job's id (None for a live grading), their rows
    written or row-locked by the caller. The jobs are row-locked on PostgreSQL whatever
    their state (``_locked_jobs``): a cancel that starts meanwhile waits for this
    transaction and then finds the item without a lease. Each item cancelled is audited
    as ``grading.cancelled``, collected ``into`` the caller's batch (appended with its
    other events once its rows are written) or else appended here. No statement when
    none of them is a regrade item.

    ``lost``: the records of those whose lease ran out in their worker's hands
    (``cancel_abandoned``); each one cancelled is first audited as its worker's loss.
    The holder of a lease is cleared, its expiry kept (none, for a grading given back);
    the revision (the ETag) moves, as the status the grading shows does.
    """
    job_ids = {job_id for job_id in items.values() if job_id is not None}
    if not job_ids:
        return []
    jobs = _locked_jobs(db, session, job_ids)
    ids = sorted(g for g, job_id in items.items() if job_id and jobs[job_id].state == "cancelled")
    if not ids:
        return []
    batch = into if into is not None else AuditBatch()
    # before the UPDATE, which clears the holders of the records in the session
    chosen = set(ids)
    workers_lost(session, [g for g in lost if g.id in chosen and g.lease_owner], actor, batch)
    cancelled = session.execute(
        update(GradingRecord)
        .where(col(GradingRecord.id).in_(ids), col(GradingRecord.status) == "pending")
        .values(status="cancelled", lease_owner=None, revision=col(GradingRecord.revision) + 1)
        .returning(col(GradingRecord.id))
        .execution_options(synchronize_session="fetch")
    ).scalars()
    moved = sorted(cancelled)
    for grading_id in moved:
        event = {
            "event": ITEM_CANCELLED,
            "entity_type": "grading",
            "entity_id": grading_id,
            "actor": actor,
            "payload": {
                "grading_id": grading_id,
                "regrade_job_id": items[grading_id],
                "status": "cancelled",
            },
        }
        batch.add(event, [grading_id])
    if into is None and batch.events:
        db.audit_many(session, batch.events, batch.covers, batch.rows)
    return moved


def _promotes(job: RegradeJobRecord | None, status: str) -> bool:
    """Whether an item of ``job`` that ends in ``status`` is promoted."""
    return job is not None and job.mode == "promote" and status == "graded"


def items_completed(
    db: Database,
    session: Session,
    gradings: Sequence[Mapping[str, Any]],
    actor: str,
    jobs: Mapping[str, RegradeJobRecord] | None = None,
    *,
    current: Mapping[str, Rubric],
) -> None:
    """The queue stored these gradings (their column values as written, in ``session``).

    For the items of regrade jobs: carry the previous gradings' overrides, promote the
    new gradings of ``promote`` jobs, and end the jobs drained. Set-wise: the jobs are
    read (row-locked on PostgreSQL, ``lock_items``; ``jobs``: as it returned them, when
    the caller took the locks already) and the previous gradings' overrides looked up
    once per batch; only an item with overrides to carry or to promote is then handled
    on its own. Nothing happens for the gradings of live submissions. ``current``: the
    rubric files' current versions by id, which a previous grading whose rubric version
    is not stored reads with (``storage.regrade.carry``).
    """
    items = [g for g in gradings if g["regrade_job_id"] is not None]
    if not items:
        return
    if jobs is None:
        jobs = lock_items(db, session, items)
    overridden = _with_overrides(session, [g["previous_grading_id"] for g in items])
    for values in items:
        job = jobs.get(values["regrade_job_id"])
        promote = _promotes(job, values["status"])
        if job is not None and (promote or values["previous_grading_id"] in overridden):
            grading = session.get(GradingRecord, values["id"])
            if grading is not None:
                _item_completed(db, session, grading, job, actor, current)
    for job in jobs.values():
        finish_if_drained(db, session, job, actor)


def _with_overrides(session: Session, grading_ids: list[str | None]) -> set[str]:
    """Those of the gradings that have overrides (in force or not); one query."""
    ids = {i for i in grading_ids if i is not None}
    if not ids:
        return set()
    query = select(col(OverrideRecord.grading_id)).where(col(OverrideRecord.grading_id).in_(ids))
    return set((session.execute(query.distinct())).scalars())


def _item_completed(
    db: Database,
    session: Session,
    grading: GradingRecord,
    job: RegradeJobRecord,
    actor: str,
    current: Mapping[str, Rubric],
) -> None:
    """Carry the overrides of the grading ``grading`` follows onto it and promote it if
    the job says so (the job locked by the caller).

    The grading a promotion replaces is the submission's current one when the item is
    done, which is not always the one the job was made from (another job may have
    promoted its own since, and a human overridden that): its overrides are the ones
    carried, so that no human decision in force is dropped by the promotion."""
    promote = _promotes(job, grading.status)
    replaced = _current_besides(db, session, grading) if promote else None
    previous = replaced or (
        session.get(GradingRecord, grading.previous_grading_id)
        if grading.previous_grading_id
        else None
    )
    carried = Carried()
    if previous is not None:
        stand_in = current.get(previous.rubric_id)
        carried = carry_overrides(session, grading, previous, db.clock(), current=stand_in)
        if carried.carried or carried.outdated:
            grading.revision += 1
            session.flush()
            db.audit(
                session,
                "grading.overrides_carried",
                entity_type="grading",
                entity_id=grading.id,
                actor=actor,
                payload=carried.payload(previous.id),
                covers=[grading.id],
                rows=carried.copies,
            )
        if carried.carried and not carried.outdated:
            _review_carried(db, session, grading, previous)
    if promote and not carried.verdict_outdated:
        _promote(db, session, grading, job, actor)


def _review_carried(
    db: Database, session: Session, grading: GradingRecord, previous: GradingRecord
) -> None:
    """Every override in force carried: the human review that made them, finished on the
    previous grading, holds for this one too (it stays out of the review queue)."""
    review = session.get(ReviewClaimRecord, previous.id)
    if review is None or review.done_at is None:
        return
    table = ReviewClaimRecord.__table__  # type: ignore[attr-defined]
    values = {"grading_id": grading.id, "done_at": review.done_at, "done_by": review.done_by}
    db.upsert(session, table, values)


def _current_query(db: Database, grading: GradingRecord) -> Select[GradingRecord]:
    """The submission's current gradings other than ``grading``, locked on PostgreSQL
    until the caller's transaction ends."""
    query = select(GradingRecord).where(
        col(GradingRecord.submission_id) == grading.submission_id,
        col(GradingRecord.is_current).is_(True),
        col(GradingRecord.id) != grading.id,
    )
    # FOR NO KEY UPDATE, as lock_items takes it: no key changes, and the gradings a new
    # job's items follow (their foreign keys' KEY SHARE) do not wait for it
    return query.with_for_update(key_share=True) if db.postgres else query


def _current_besides(
    db: Database, session: Session, grading: GradingRecord
) -> GradingRecord | None:
    """The submission's current grading other than ``grading``, or None."""
    query = _current_query(db, grading).order_by(col(GradingRecord.created_at))
    return session.execute(query).scalars().first()


def _promote(
    db: Database, session: Session, grading: GradingRecord, job: RegradeJobRecord, actor: str
) -> None:
    query = _current_query(db, grading)
    superseded = list(session.execute(query).scalars())
    for old in superseded:
        old.is_current, old.superseded_by = False, grading.id
        old.revision += 1
    grading.is_current = True
    if superseded:  # the submission keeps its place in the list of gradings
        grading.listed_at = min(old.listed_at for old in superseded)
    review_from = _review_followed(db, session, grading, superseded)
    tags = _tags_followed(session, grading, superseded)
    session.flush()
    db.audit(
        session,
        "grading.promoted",
        entity_type="grading",
        entity_id=grading.id,
        actor=actor,
        payload={
            "grading_id": grading.id,
            "regrade_job_id": job.id,
            "superseded": [old.id for old in superseded],
            "passed": grading.passed,
            **({"review_from": review_from} if review_from else {}),
            **({"tags_carried": [t.tag for t in tags]} if tags else {}),
        },
        covers=[grading.id, *(old.id for old in superseded)],
        rows=tags,
    )


def _tags_followed(
    session: Session, grading: GradingRecord, superseded: list[GradingRecord]
) -> list[FailureTagRecord]:
    """Every failure tag in force on the gradings replaced, copied onto ``grading`` with
    its author and note: a tag says what the agent got wrong, which a new judge's grading
    of the same diagnosis does not change (reports and ``?tag=`` read current gradings).
    A tag is copied once (``FailureTagRecord.identity``: the same tag, author and note):
    the new grading may hold it already, tagged before the promote, and two gradings
    replaced at once may each hold a copy of it."""
    if not superseded:
        return []
    query = select(FailureTagRecord).where(
        col(FailureTagRecord.grading_id).in_([old.id for old in superseded]),
        col(FailureTagRecord.removed_at).is_(None),
    )
    held = select(FailureTagRecord).where(
        col(FailureTagRecord.grading_id) == grading.id,
        col(FailureTagRecord.removed_at).is_(None),
    )
    kept = {tag.identity() for tag in session.execute(held).scalars()}
    copies = []
    for tag in session.execute(query.order_by(col(FailureTagRecord.id))).scalars():
        if tag.identity() in kept:
            continue
        kept.add(tag.identity())
        copies.append(
            FailureTagRecord(
                grading_id=grading.id,
                tag=tag.tag,
                note=tag.note,
                author_id=tag.author_id,
                author_name=tag.author_name,
                created_at=tag.created_at,
            )
        )
    session.add_all(copies)
    return copies


#: what of a review in progress follows the item onto the grading that replaces it
_IN_PROGRESS = (
    "claimed_by", "claimed_by_name", "claimed_until", "skipped_at", "skipped_by",
    "skipped_by_name", "skip_note", "assigned_to", "assigned_to_name", "assigned_by",
    "assigned_at",
)  # fmt: skip


def _review_followed(
    db: Database, session: Session, grading: GradingRecord, superseded: list[GradingRecord]
) -> str | None:
    """A review in progress on the grading replaced (assigned, claimed, skipped with a
    note; not done) follows the item onto ``grading``: the assignee keeps it in their
    queue and a live claim keeps a second adjudicator off it. Nothing moves when
    ``grading`` has a review of its own (a finished one carried with the overrides).
    The id of the grading it came from, or None."""
    if session.get(ReviewClaimRecord, grading.id) is not None:
        return None
    for old in superseded:
        review = session.get(ReviewClaimRecord, old.id)
        if review is None or review.done_at is not None:
            continue
        values = {name: getattr(review, name) for name in _IN_PROGRESS}
        if not any(value is not None for value in values.values()):
            continue
        table = ReviewClaimRecord.__table__  # type: ignore[attr-defined]
        db.upsert(session, table, {"grading_id": grading.id, **values})
        return old.id
    return None


def finish_if_drained(db: Database, session: Session, job: RegradeJobRecord, actor: str) -> None:
    """End the job when none of its items is pending any more."""
    if job.state not in ("queued", "running", "paused"):
        return
    pending = select(func.count()).where(
        col(GradingRecord.regrade_job_id) == job.id, col(GradingRecord.status) == "pending"
    )
    if session.execute(pending).scalar_one():
        return
    end_job(db, session, job, actor)


def end_job(
    db: Database,
    session: Session,
    job: RegradeJobRecord,
    actor: str,
    *,
    state: str | None = None,
    covers: list[str] | None = None,
    audited: AuditBatch | None = None,
) -> None:
    """Write the final state and counts of a job and audit it.

    ``covers``: gradings the caller changed in this transaction (a cancel's items);
    ``audited``: the caller's events of this transaction (a cancel's lost workers),
    appended before the job's in one go.
    """
    now = db.clock()
    job.finished_at = now
    progress = job_progress(session, job, now)
    counts = progress.as_dict()
    if state is None:
        state = "failed" if counts["done"] == 0 and counts["failed"] > 0 else "done"
        if state == "failed":
            job.error = "every item is unscored: the judge gave no usable answer"
    job.state, job.counts = state, counts
    session.flush()
    batch = audited if audited is not None else AuditBatch()
    db.audit(
        session,
        f"regrade_job.{state}",
        entity_type="regrade_job",
        entity_id=job.id,
        actor=actor,
        payload={"job_id": job.id, "state": state, "counts": counts},
        covers=covers or (),
        into=batch,
    )
    db.audit_many(session, batch.events, batch.covers, batch.rows)
