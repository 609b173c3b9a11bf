"""Import jobs: an upload stored whole, then imported in the background with progress.

A job is created with its upload in one transaction (so an accepted upload survives a
crash), claimed by one process at a time, and reports progress after every batch.
A claim whose heartbeat is older than the stale limit (its process stopped) is taken
over and the import started again from the top: imports are idempotent, so rows stored
before the stop are counted as already imported, never stored twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, delete, or_, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.database import Database
from storage.errors import NotFound
from storage.imports.tables import ImportJobRecord, ImportUploadRecord

__all__ = ["ImportJobQueries"]


def _held_by(worker: str) -> tuple[ColumnElement[bool], ...]:
    """The conditions of a job ``worker`` holds: running, claimed by it."""
    return col(ImportJobRecord.claimed_by) == worker, col(ImportJobRecord.state) == "running"


class ImportJobQueries:
    """Creating, claiming and finishing import jobs."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def create(self, job: ImportJobRecord, data: bytes) -> ImportJobRecord:
        """Store ``job`` (queued) with its upload, audited as ``import_job.created``."""

        def store(session: Session) -> None:
            job.created_at = self._db.clock()
            session.add(job)
            session.flush()
            session.add(ImportUploadRecord(job_id=job.id, data=data))
            session.flush()
            payload = {"kind": job.kind, "archive": job.archive, "size": job.size}
            self._db.audit(
                session,
                "import_job.created",
                entity_type="import_job",
                entity_id=job.id,
                actor=job.created_by,
                payload={**payload, "sha256": job.sha256, "rubric": job.rubric},
            )

        await self._db.run(store)
        return job

    async def get(self, job_id: str) -> ImportJobRecord:
        """The job; ``NotFound`` if there is none."""
        job = await self._db.run_read(lambda session: session.get(ImportJobRecord, job_id))
        if job is None:
            raise NotFound(f"no import job {job_id!r}")
        return job

    async def claim(self, worker: str, *, stale_before: datetime) -> ImportJobRecord | None:
        """The oldest queued job, or one whose claim went stale, now claimed by ``worker``."""
        return await self._db.run(self._claim, worker, stale_before)

    def _claim(
        self, session: Session, worker: str, stale_before: datetime
    ) -> ImportJobRecord | None:
        """Claim in ``session``'s transaction: the job as claimed, or None."""
        query = (
            select(ImportJobRecord)
            .where(
                or_(
                    col(ImportJobRecord.state) == "queued",
                    (col(ImportJobRecord.state) == "running")
                    & (col(ImportJobRecord.heartbeat_at) < stale_before),
                )
            )
            .order_by(col(ImportJobRecord.created_at), col(ImportJobRecord.id))
            .limit(1)
        )
        job = session.execute(query).scalar()
        if job is None:
            return None
        now = self._db.clock()
        taken = session.execute(
            update(ImportJobRecord)
            .where(
                col(ImportJobRecord.id) == job.id,
                col(ImportJobRecord.state) == job.state,
                col(ImportJobRecord.attempts) == job.attempts,
            )
            .values(
                state="running",
                claimed_by=worker,
                heartbeat_at=now,
                attempts=job.attempts + 1,
                started_at=job.started_at or now,
            )
            .returning(col(ImportJobRecord.id))
        )
        if taken.first() is None:
            return None  # another process took it first
        return session.get(ImportJobRecord, job.id, populate_existing=True)

    async def upload(self, job_id: str) -> bytes:
        """The bytes uploaded for the job; ``NotFound`` once it is finished."""
        record = await self._db.run_read(lambda session: session.get(ImportUploadRecord, job_id))
        if record is None:
            raise NotFound(f"import job {job_id!r} has no upload")
        return bytes(record.data)

    async def progress(self, job_id: str, worker: str, **values: Any) -> bool:
        """Record progress (``total``, ``done``, ``report``, ``errors``) and the heartbeat.

        False when the job is no longer this worker's (it was taken over).
        """

        def record(session: Session) -> bool:
            statement = (
                update(ImportJobRecord)
                .where(col(ImportJobRecord.id) == job_id, *_held_by(worker))
                .values(heartbeat_at=self._db.clock(), **values)
                .returning(col(ImportJobRecord.id))
            )
            return session.execute(statement).first() is not None

        return await self._db.run(record)

    async def release(self, job_id: str, worker: str, *, error: str | None = None) -> bool:
        """Give a running job back (shutdown, a database fault): queued again, for the next
        process at once; ``error`` says why it was stopped (kept until it ends)."""
        values: dict[str, Any] = {"state": "queued", "claimed_by": None}
        if error is not None:
            values["error"] = error
        statement = (
            update(ImportJobRecord)
            .where(col(ImportJobRecord.id) == job_id, *_held_by(worker))
            .values(**values)
            .returning(col(ImportJobRecord.id))
        )
        return await self._db.run(lambda session: session.execute(statement).first() is not None)

    async def release_all(self, worker: str, *, error: str | None = None) -> list[str]:
        """Give back every job ``worker`` holds running (its process stops, whatever it was
        doing: a claim that committed as its caller was cancelled too; or a give-back of
        its own failed); their ids. ``error``, when given, says why they were stopped."""
        values: dict[str, Any] = {"state": "queued", "claimed_by": None}
        if error is not None:
            values["error"] = error
        statement = (
            update(ImportJobRecord)
            .where(*_held_by(worker))
            .values(**values)
            .returning(col(ImportJobRecord.id))
        )
        return await self._db.run(lambda session: list(session.execute(statement).scalars()))

    async def finish(
        self, job_id: str, worker: str, *, state: str, error: str | None = None, **values: Any
    ) -> None:
        """End the job (``done`` or ``failed``), drop its upload, audit ``import_job.<state>``."""

        def end(session: Session) -> None:
            now = self._db.clock()
            result = session.execute(
                update(ImportJobRecord)
                .where(col(ImportJobRecord.id) == job_id, col(ImportJobRecord.claimed_by) == worker)
                .values(state=state, error=error, finished_at=now, heartbeat_at=now, **values)
                .returning(col(ImportJobRecord.created_by))
            )
            owner = result.scalar()
            if owner is None:
                return
            session.execute(
                delete(ImportUploadRecord).where(col(ImportUploadRecord.job_id) == job_id)
            )
            self._db.audit(
                session,
                f"import_job.{state}",
                entity_type="import_job",
                entity_id=job_id,
                actor=worker,
                payload={"error": error, **{k: v for k, v in values.items() if k == "report"}},
            )

        await self._db.run(end)
