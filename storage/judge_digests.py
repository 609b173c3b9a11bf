"""Judge digests: which model answered under each judge's name, and when that changed.

A row is written when a judge's digest (``judge.identity``) differs from the latest one
stored for its name (``backend:model``, as qualifications name it); when it replaces
another, that is a change of judge: the row says so (``changed``) and the transaction
audits ``judge.changed`` (announced to webhooks). Rows are never updated. A name's
digests are learned under its named lock, so processes learning the same change at once
record it once.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Index, String, select
from sqlalchemy.orm import Session
from sqlmodel import Field, SQLModel, col

from storage.database import Database, hold_named_lock
from storage.tables import _created

__all__ = ["JudgeDigestRecord", "JudgeDigestRepository"]


class JudgeDigestRecord(SQLModel, table=True):
    """A digest first seen behind a judge's name."""

    __tablename__ = "judge_digest"
    __table_args__ = (Index("ix_judge_digest_judge_spec_id", "judge_spec", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    #: the judge's name without its address, as calibration runs name it
    judge_spec: str = Field(sa_type=String(512))
    digest: str = Field(sa_type=String(256))
    #: the digest stored before for this name (None: the first one seen)
    previous_digest: str | None = Field(default=None, sa_type=String(256))
    #: whether this digest replaced another: the judge changed behind its name
    changed: bool = False
    seen_at: datetime = _created()


_D = JudgeDigestRecord


def _latest(session: Session, judge_spec: str) -> JudgeDigestRecord | None:
    query = select(_D).where(col(_D.judge_spec) == judge_spec).order_by(col(_D.id).desc())
    return session.execute(query.limit(1)).scalars().first()


class JudgeDigestRepository:
    """The digests seen behind judges' names."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def learn(self, judge_spec: str, digest: str, *, actor: str) -> JudgeDigestRecord | None:
        """Store ``digest`` if it is not the latest stored for ``judge_spec``; the new row
        (``changed`` when it replaced another, audited as ``judge.changed``), or None.

        The latest digest is read under ``judge_spec``'s digest lock, so of processes
        learning the same digest together one stores it and the others find it stored."""

        def work(session: Session) -> JudgeDigestRecord | None:
            hold_named_lock(session, "judge_digest", judge_spec)
            latest = _latest(session, judge_spec)
            if latest is not None and latest.digest == digest:
                return None
            previous = None if latest is None else latest.digest
            row = _D(
                judge_spec=judge_spec,
                digest=digest,
                previous_digest=previous,
                changed=previous is not None,
                seen_at=self._db.clock(),
            )
            session.add(row)
            session.flush()
            if row.changed:
                self._db.audit(
                    session,
                    "judge.changed",
                    entity_type="judge",
                    entity_id=judge_spec,
                    actor=actor,
                    payload={"judge": judge_spec, "previous_digest": previous, "digest": digest},
                )
            return row

        return await self._db.run(work)

    async def current(self, judge_spec: str) -> JudgeDigestRecord | None:
        """The latest digest stored for ``judge_spec``, or None."""
        return await self._db.run_read(_latest, judge_spec)

    async def recent(self, *, limit: int = 200) -> list[JudgeDigestRecord]:
        """The newest rows of every judge, newest first."""
        query = select(_D).order_by(col(_D.id).desc()).limit(limit)
        return await self._db.run_read(lambda s: list(s.execute(query).scalars()))
