"""Progress of a regrade job, computed from its items (gradings) and their judge calls.

Nothing is counted twice or kept in sync by hand: done, failed (unscored), remaining,
judge calls, cache hits and cached items are aggregates over the job's gradings, so they
stay right whichever worker process did the work and across restarts.

Cache hits are *calls* answered from the judge cache (as the job object shows them:
beside the judge calls, several per item with per-question asking); cached items are
*items*, those answered wholly from the cache (as ``/metrics`` counts a job's items).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, func, select, tuple_
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.regrade.tables import TERMINAL_STATES, RegradeJobRecord
from storage.tables import RESULT_STATUSES, GradingRecord, JudgeCallRecord

__all__ = ["JobProgress", "JobView", "active_jobs", "job_progress", "recent_jobs"]


@dataclass(frozen=True)
class JobProgress:
    """Counts of a job's items and calls, with the rate and the time still needed."""

    total: int = 0
    #: graded items
    done: int = 0
    #: unscored items (the judge could not give a usable answer)
    failed: int = 0
    cancelled: int = 0
    #: items still pending
    remaining: int = 0
    #: calls that reached the judge
    judge_calls: int = 0
    #: calls answered from the judge cache
    cache_hits: int = 0
    #: finished items (graded or unscored) answered wholly from the judge cache: each of
    #: their calls a cache hit, none reached the judge
    cached_items: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: finished items per second since the job started
    rate: float | None = None
    eta_seconds: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready copy."""
        return asdict(self)


@dataclass(frozen=True)
class JobView:
    """A job row with its progress."""

    job: RegradeJobRecord
    progress: JobProgress


def _item_counts(session: Session, job_id: str) -> dict[str, int]:
    query = (
        select(col(GradingRecord.status), func.count())
        .where(col(GradingRecord.regrade_job_id) == job_id)
        .group_by(col(GradingRecord.status))
    )
    return {status: int(count or 0) for status, count in session.execute(query)}


def _call_counts(session: Session, job_id: str) -> dict[bool, tuple[int, int, int]]:
    query = (
        select(
            col(JudgeCallRecord.cached),
            func.count(),
            func.coalesce(func.sum(JudgeCallRecord.prompt_tokens), 0),
            func.coalesce(func.sum(JudgeCallRecord.completion_tokens), 0),
        )
        .join(GradingRecord, col(GradingRecord.id) == col(JudgeCallRecord.grading_id))
        .where(col(GradingRecord.regrade_job_id) == job_id)
        .group_by(col(JudgeCallRecord.cached))
    )
    rows = session.execute(query)
    return {bool(cached): (int(n or 0), int(p or 0), int(c or 0)) for cached, n, p, c in rows}


def _cached_items(session: Session, job_id: str) -> int:
    """Finished items of the job with judge calls, every one of them a cache hit."""
    per_item = (
        select(col(JudgeCallRecord.grading_id))
        .join(GradingRecord, col(GradingRecord.id) == col(JudgeCallRecord.grading_id))
        .where(
            col(GradingRecord.regrade_job_id) == job_id,
            col(GradingRecord.status).in_(RESULT_STATUSES),
        )
        .group_by(col(JudgeCallRecord.grading_id))
        .having(func.sum(case((col(JudgeCallRecord.cached), 0), else_=1)) == 0)
        .subquery()
    )
    return int(session.execute(select(func.count()).select_from(per_item)).scalar_one())


def _rate(job: RegradeJobRecord, finished: int, now: datetime) -> float | None:
    """Items finished a second of the time the job ran: its rests (paused, cancelled)
    left out."""
    if job.started_at is None or finished == 0:
        return None
    end = job.rested_since or job.finished_at or now
    elapsed = (end - job.started_at).total_seconds() - job.rested_seconds
    return finished / elapsed if elapsed > 0 else None


def job_progress(session: Session, job: RegradeJobRecord, now: datetime) -> JobProgress:
    """The job's progress as of ``now``."""
    items = _item_counts(session, job.id)
    calls = _call_counts(session, job.id)
    real, hits = calls.get(False, (0, 0, 0)), calls.get(True, (0, 0, 0))
    done, failed = items.get("graded", 0), items.get("unscored", 0)
    remaining = items.get("pending", 0)
    rate = _rate(job, done + failed, now)
    eta = remaining / rate if rate and remaining and job.state == "running" else None
    return JobProgress(
        total=job.total,
        done=done,
        failed=failed,
        cancelled=items.get("cancelled", 0),
        remaining=remaining,
        judge_calls=real[0],
        cache_hits=hits[0],
        cached_items=_cached_items(session, job.id) if hits[0] else 0,
        prompt_tokens=real[1],
        completion_tokens=real[2],
        rate=round(rate, 4) if rate else None,
        eta_seconds=round(eta, 1) if eta is not None else None,
    )


def recent_jobs(
    session: Session, now: datetime, *, limit: int, before: tuple[datetime, str] | None = None
) -> list[JobView]:
    """The ``limit`` newest jobs with their progress, newest first (by creation, then
    id); with ``before``, a job's ``(created_at, id)``, the newest of those older than it."""
    job = RegradeJobRecord
    query = select(job).order_by(col(job.created_at).desc(), col(job.id).desc()).limit(limit)
    if before is not None:
        query = query.where(tuple_(col(job.created_at), col(job.id)) < before)
    jobs = list(session.execute(query).scalars())
    return [JobView(job=job, progress=job_progress(session, job, now)) for job in jobs]


def active_jobs(session: Session, now: datetime, *, limit: int = 200) -> list[JobView]:
    """Up to ``limit`` jobs that have not ended (queued, running or paused), oldest
    first, with their progress."""
    query = (
        select(RegradeJobRecord)
        .where(col(RegradeJobRecord.state).not_in(TERMINAL_STATES))
        .order_by(col(RegradeJobRecord.created_at), col(RegradeJobRecord.id))
        .limit(limit)
    )
    jobs = list(session.execute(query).scalars())
    return [JobView(job=job, progress=job_progress(session, job, now)) for job in jobs]
