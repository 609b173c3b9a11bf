"""Regrade jobs: creating one with its items, reading its progress, pausing and cancelling.

A job's items are gradings: one new pending grading per covered submission, with the
job's rubric (or, for a job that names none, the one its submission was graded with:
:meth:`RegradeTarget.item_rubric`) and judge, ``is_current`` false and
``previous_grading_id`` pointing at the grading that was current when the job started.
They are all written in the job's own transaction, so a job exists whole or not at all
and survives any restart; the usual workers grade them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, insert, or_, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

from api.regrade.batch_queries import add_engine
from api.regrade.flip_reads import FlipItem, read_pairs
from api.regrade.selection import (
    RegradeFilter,
    candidates_query,
    masked_filter,
    matching_scenarios,
    totals_query,
)
from judge.masking import mask_passwords
from judge.rubric import Rubric
from storage.canonical import iso_utc
from storage.catalog import CatalogRepository
from storage.cursors import CursorCodec, continues
from storage.database import AuditBatch, Database
from storage.errors import Conflict, NotFound
from storage.gradings import grading_position
from storage.lost_workers import workers_lost
from storage.regrade.lifecycle import (
    end_job,
    finish_if_drained,
    locked_job,
)
from storage.regrade.progress import JobProgress, JobView, job_progress, recent_jobs
from storage.regrade.tables import RegradeJobRecord
from storage.tables import GradingRecord, ScenarioRecord, new_id

__all__ = ["ACTION_STATES", "Candidate", "RegradeJobQueries", "RegradeTarget", "RegradeTotals"]

#: the states a job may be in for each action (a dry run allows none)
ACTION_STATES: dict[str, tuple[str, ...]] = {
    "pause": ("queued", "running"),
    "resume": ("paused", "cancelled"),
    "cancel": ("queued", "running", "paused"),
}

_INSERT_BATCH = 1000


@dataclass(frozen=True)
class RegradeTarget:
    """What a job grades with: rubric, judge (spec, backend, model) and mode."""

    #: the rubric every item is graded with; None: each item keeps its submission's
    #: (:meth:`item_rubric`)
    rubric: Rubric | None
    judge_spec: str
    judge_backend: str
    judge_model: str
    mode: str
    #: as_submitted (each submission's own ground truth) | latest (its scenario's newest)
    ground_truth: str = "as_submitted"
    #: live (one request at a time) | batch (the OpenAI Batch API) | offline (a file out
    #: and a results file in: ``api.regrade.batch_queries``)
    engine: str = "live"
    #: a batch request that failed or is missing: retried live | in a new batch
    engine_retry: str = "live"
    #: the rubric files' current versions by id (``RubricCatalog.current``): what an item
    #: keeps when the job names no rubric
    current: Mapping[str, Rubric] = field(default_factory=dict)

    def item_rubric(self, rubric_id: str, version: str) -> tuple[str, str]:
        """The rubric (id, version) an item is graded with, given those of the grading it
        regrades: the job's rubric; for a job that names none, the current version of the
        grading's own rubric (as ``api.service.presenters.stand_in_rubric`` reads an
        imported SREGym verdict's), or its own version where that rubric id has no file
        any more (the stored version; a version never stored leaves the item unscored,
        ``rubric_unknown``, as a job's rubric gone would)."""
        if self.rubric is not None:
            return self.rubric.id, self.rubric.version
        current = self.current.get(rubric_id)
        return (rubric_id, version) if current is None else (current.id, current.version)

    def rubrics_used(self, keys: set[tuple[str, str]]) -> list[Rubric]:
        """The rubrics the job stores in the catalog: its rubric, or the current versions
        among its items' (id, version) ``keys``, in id order (an item that keeps its own
        version finds it stored already)."""
        if self.rubric is not None:
            return [self.rubric]
        used = [r for r in self.current.values() if (r.id, r.version) in keys]
        return sorted(used, key=lambda r: r.id)


@dataclass(frozen=True)
class RegradeTotals:
    """Covered submissions and their text size, from SQL alone."""

    submissions: int
    text_chars: int
    empty_diagnoses: int

    def plus(self, other: RegradeTotals) -> RegradeTotals:
        """These totals and ``other``'s together."""
        return RegradeTotals(
            self.submissions + other.submissions,
            self.text_chars + other.text_chars,
            self.empty_diagnoses + other.empty_diagnoses,
        )


@dataclass(frozen=True)
class Candidate:
    """One covered submission's texts (for cache look-ups of a dry run)."""

    grading_id: str
    submission_id: str
    #: the scenario version the regrade would grade against (None for inline)
    scenario_version: int | None
    #: the rubric of its current grading (``RegradeTarget.item_rubric`` says the item's)
    rubric_id: str
    rubric_version: str
    diagnosis: str
    ground_truth: str
    #: the submission's scenario (None for an inline ground truth) and sender: whose
    #: cache entries its grading reads (``judge.cache.ground_truth_namespace``)
    scenario_id: str | None
    submitted_by: str


class RegradeJobQueries:
    """Creating regrade jobs with their items, reading and changing them."""

    def __init__(self, db: Database) -> None:
        """Work through ``db`` (a job's rubric version is stored with the job)."""
        self._db = db
        self._catalog = CatalogRepository(db)
        self._cursors = CursorCodec(db.key, "regrade-jobs")

    async def pairs(self, job_id: str) -> list[FlipItem]:
        """Every item of the job beside its previous grading; NotFound for an unknown job."""
        return await read_pairs(self._db, job_id)

    @staticmethod
    def _scenarios(session: Session, f: RegradeFilter) -> list[str] | None:
        if not f.tags:
            return None
        rows = list(session.execute(select(ScenarioRecord)).scalars())
        return matching_scenarios(rows, f.tags)

    async def totals(self, f: RegradeFilter, *, latest: bool = False) -> RegradeTotals:
        """How many submissions the filter covers and how much text they hold
        (``latest``: with each scenario's newest ground truth)."""

        def work(session: Session) -> RegradeTotals:
            count, chars, empty = session.execute(
                totals_query(f, self._scenarios(session, f), latest=latest)
            ).one()
            return RegradeTotals(int(count), int(chars or 0), int(empty or 0))

        return await self._db.run_read(work)

    async def rubric_totals(
        self, f: RegradeFilter, *, latest: bool = False
    ) -> dict[tuple[str, str], RegradeTotals]:
        """:meth:`totals` for each rubric (id, version) of the covered current gradings."""

        def work(session: Session) -> dict[tuple[str, str], RegradeTotals]:
            query = totals_query(f, self._scenarios(session, f), latest=latest, by_rubric=True)
            return {
                (rubric_id, version): RegradeTotals(int(count), int(chars or 0), int(empty or 0))
                for rubric_id, version, count, chars, empty in session.execute(query)
            }

        return await self._db.run_read(work)

    async def candidates(self, f: RegradeFilter, *, latest: bool = False) -> list[Candidate]:
        """The covered submissions with their texts (``latest``: the newest ground truths)."""

        def work(session: Session) -> list[Candidate]:
            scenarios = self._scenarios(session, f)
            query = candidates_query(f, scenarios, texts=True, latest=latest)
            return [Candidate(*row) for row in session.execute(query)]

        return await self._db.run_read(work)

    async def create_job(
        self,
        f: RegradeFilter,
        target: RegradeTarget,
        *,
        actor: str,
        dry_run: bool = False,
        estimate: dict[str, Any] | None = None,
    ) -> JobView:
        """Store a job and its items in one transaction; a dry run stores nothing."""
        now = self._db.clock()
        job = RegradeJobRecord(
            id=new_id(),
            state="done" if dry_run else "queued",
            dry_run=dry_run,
            filter=f.as_json(),
            rubric_id=None if target.rubric is None else target.rubric.id,
            rubric_version=None if target.rubric is None else target.rubric.version,
            judge_spec=target.judge_spec,
            mode=target.mode,
            ground_truth=target.ground_truth,
            estimate=dict(estimate or {}),
            created_by=actor,
            created_at=now,
            finished_at=now if dry_run else None,
        )
        if dry_run:  # stores nothing: the job answered is the estimate only
            job.total = int((estimate or {}).get("submissions", 0))
            return JobView(job=job, progress=JobProgress(total=job.total))

        def store(session: Session) -> JobView:
            session.add(job)
            session.flush()
            items, rubrics = self._create_items(session, job, f, target)
            job.total = len(items)
            if target.engine != "live" and items:  # held back until its replies are in
                add_engine(session, job.id, target.engine, target.engine_retry, now)
            session.flush()
            # audited (a new version): after the items, whose foreign keys lock the
            # gradings they follow (row locks before the audit chain's lock)
            for rubric in target.rubrics_used(rubrics):
                self._catalog.ensure_rubric(session, rubric, actor=actor)
            self._db.audit(
                session,
                "regrade_job.created",
                entity_type="regrade_job",
                entity_id=job.id,
                actor=actor,
                payload={
                    "job_id": job.id,
                    "filter": masked_filter(job.filter),
                    "dry_run": dry_run,
                    "rubric": (
                        None
                        if job.rubric_id is None
                        else {"id": job.rubric_id, "version": job.rubric_version}
                    ),
                    "judge": mask_passwords(job.judge_spec),
                    "mode": job.mode,
                    "ground_truth": job.ground_truth,
                    **(
                        {"engine": target.engine, "engine_retry": target.engine_retry}
                        if target.engine != "live"
                        else {}
                    ),
                    "total": job.total,
                    "estimate": job.estimate,
                },
                covers=items,
            )
            if job.total == 0:
                end_job(self._db, session, job, actor)
            return JobView(job=job, progress=job_progress(session, job, now))

        return await self._db.run(store)

    def _create_items(
        self, session: Session, job: RegradeJobRecord, f: RegradeFilter, t: RegradeTarget
    ) -> tuple[list[str], set[tuple[str, str]]]:
        """Insert the job's pending gradings; their ids and the rubrics (id, version)
        they are graded with (:meth:`RegradeTarget.item_rubric`)."""
        latest = t.ground_truth == "latest"
        query = candidates_query(f, self._scenarios(session, f), latest=latest)
        covered = list(session.execute(query))
        # the columns all items share (defaults included), then plain values per item
        shared = GradingRecord(
            id="",
            submission_id="",
            rubric_id="",
            rubric_version="",
            judge_spec=t.judge_spec,
            judge_backend=t.judge_backend,
            judge_model=t.judge_model,
            status="pending",
            is_current=False,
            created_at=self._db.clock(),
            regrade_job_id=job.id,
        ).model_dump()
        rows = []
        for previous_id, submission_id, version, rubric_id, rubric_version in covered:
            rubric_id, rubric_version = t.item_rubric(rubric_id, rubric_version)
            rows.append(
                {
                    **shared,
                    "id": new_id(),
                    "submission_id": submission_id,
                    "previous_grading_id": previous_id,
                    "scenario_version": version,
                    "rubric_id": rubric_id,
                    "rubric_version": rubric_version,
                    "review_reasons": [],
                }
            )
        table = GradingRecord.__table__  # type: ignore[attr-defined]
        for start in range(0, len(rows), _INSERT_BATCH):
            session.execute(insert(table), rows[start : start + _INSERT_BATCH])
        return [row["id"] for row in rows], {(r["rubric_id"], r["rubric_version"]) for r in rows}

    async def get_job(self, job_id: str) -> JobView:
        """A job with its progress; NotFound for an unknown id."""

        def work(session: Session) -> JobView:
            job = session.get(RegradeJobRecord, job_id)
            if job is None:
                raise NotFound(f"no regrade job {job_id!r}")
            return JobView(job=job, progress=job_progress(session, job, self._db.clock()))

        return await self._db.run_read(work)

    async def recent_jobs(
        self, *, limit: int = 50, cursor: str | None = None
    ) -> tuple[list[JobView], str | None]:
        """A page of jobs with their progress, newest first, and the cursor of the older
        ones (None on the last page).

        Keyset paging on ``(created_at, id)``: the signed cursor (``storage.cursors``)
        holds the last listed job's place, so jobs started between pages never shift,
        repeat or skip a row. A cursor not signed here for this list raises InvalidCursor.
        """
        before = grading_position(self._cursors.decode(cursor)) if continues(cursor) else None

        def work(session: Session) -> list[JobView]:
            return recent_jobs(session, self._db.clock(), limit=limit + 1, before=before)

        views = await self._db.run_read(work)
        if len(views) <= limit:
            return views, None
        last = views[limit - 1].job
        return views[:limit], self._cursors.encode([iso_utc(last.created_at), last.id])

    async def change_job(self, job_id: str, action: str, *, actor: str) -> JobView:
        """``pause``, ``resume`` or ``cancel`` a job; Conflict when its state does not allow it."""

        def work(session: Session) -> JobView:
            job = locked_job(self._db, session, job_id)
            if job is None:
                raise NotFound(f"no regrade job {job_id!r}")
            allowed = ACTION_STATES[action]
            if job.dry_run or job.state not in allowed:
                raise Conflict(f"a {job.state} regrade job cannot be {action}d")
            now = self._db.clock()
            if action == "cancel":
                job.rested_since = job.rested_since or now
                # an item with the judge finishes, as under a pause: its answer is kept
                lost = AuditBatch()
                moved = self._cancel_items(session, job.id, now, actor, into=lost)
                end_job(
                    self._db, session, job, actor, state="cancelled", covers=moved, audited=lost
                )
            else:
                moved = []
                if job.state == "cancelled":
                    moved = self._set_items(session, job.id, "cancelled", "pending")
                    job.finished_at, job.counts = None, {}
                paused = action == "pause"
                if paused:
                    job.rested_since = now
                else:
                    _end_rest(job, now)
                job.state = "paused" if paused else ("running" if job.started_at else "queued")
                session.flush()
                self._db.audit(
                    session,
                    f"regrade_job.{action}d",
                    entity_type="regrade_job",
                    entity_id=job.id,
                    actor=actor,
                    payload={"job_id": job.id, "state": job.state},
                    covers=moved,
                )
                if not paused:
                    finish_if_drained(self._db, session, job, actor)
            return JobView(job=job, progress=job_progress(session, job, self._db.clock()))

        return await self._db.run(work)

    def _cancel_items(
        self, session: Session, job_id: str, now: datetime, actor: str, *, into: AuditBatch
    ) -> list[str]:
        """Cancel a job's pending items but those a worker holds a live lease on (they
        are with the judge); the ids cancelled.

        An item whose lease ran out in its worker's hands lost that worker: its row is
        locked first and the loss audited ``into`` the batch (``storage.lost_workers``);
        its lease's expiry is kept, so the claim that takes it after a resume counts the
        loss. Such an item another transaction held meanwhile stays pending: the claims'
        sweep of abandoned items cancels it, audited alike.
        """
        expires, holder = col(GradingRecord.lease_expires_at), col(GradingRecord.lease_owner)
        ran_out = select(GradingRecord).where(
            col(GradingRecord.regrade_job_id) == job_id,
            col(GradingRecord.status) == "pending",
            holder.is_not(None),
            expires < now,  # as a claim reads it: a lease that ends now is live
        )
        if self._db.postgres:
            ran_out = ran_out.with_for_update(skip_locked=True)
        lost = list(session.execute(ran_out).scalars())
        workers_lost(session, lost, actor, into)
        not_live = or_(expires.is_(None), expires < now)
        unheld = or_(holder.is_(None), col(GradingRecord.id).in_([g.id for g in lost]))
        return self._set_items(session, job_id, "pending", "cancelled", not_live, unheld)

    def _set_items(
        self, session: Session, job_id: str, old: str, new: str, *where: ColumnElement[bool]
    ) -> list[str]:
        """Move a job's items from status ``old`` to ``new`` (those of them ``where``
        selects), skipping rows being written; the ids moved (for the audit event that
        covers them). The status is shown, so each moved item's revision (its ETag)
        moves too. A lease's holder is cleared and its expiry kept (``_cancel_items``).
        """
        ids = select(col(GradingRecord.id)).where(
            col(GradingRecord.regrade_job_id) == job_id, col(GradingRecord.status) == old, *where
        )
        if self._db.postgres:
            ids = ids.with_for_update(skip_locked=True)
        moved = session.execute(
            update(GradingRecord)
            .where(col(GradingRecord.id).in_(ids))
            .values(status=new, lease_owner=None, revision=col(GradingRecord.revision) + 1)
            .returning(col(GradingRecord.id))
            .execution_options(synchronize_session=False)
        )
        return list(moved.scalars())


def _end_rest(job: RegradeJobRecord, now: datetime) -> None:
    """A resumed job: the rest that ends now counts as rest (from its start at the
    earliest: resting before the first item was claimed takes nothing off its rate)."""
    if job.rested_since is not None and job.started_at is not None:
        job.rested_seconds += (now - max(job.rested_since, job.started_at)).total_seconds()
    job.rested_since = None
