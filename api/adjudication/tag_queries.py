"""Failure tags: a vocabulary (shipped file plus admin additions) and tags on gradings.

Tags are added to and removed from the grading in force: a grading a promoted regrade
superseded refuses both (``api.adjudication.superseded``), since the promote carried its
tags onto the current grading, which reports and ``?tag=`` read.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from api.adjudication.superseded import refuse_superseded
from storage.bytewise import bytewise
from storage.database import AuditBatch, Database
from storage.errors import Conflict, InvalidReview, NotFound
from storage.review_tables import FailureTagRecord, TagVocabularyRecord
from storage.tables import GradingRecord

__all__ = ["TagQueries"]


class TagQueries:
    """Vocabulary and tags."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def ensure_vocabulary(self, entries: Mapping[str, str]) -> int:
        """Add the shipped tags that are missing, each audited as ``tag.defined`` by
        ``system`` (as an admin's addition is by the admin); returns how many were added."""
        table = TagVocabularyRecord.__table__  # type: ignore[attr-defined]

        def add_missing(session: Session) -> int:
            audits = AuditBatch()  # appended after every row: the lock order of storage.database
            for tag, description in entries.items():
                values = {
                    "tag": tag,
                    "description": description,
                    "source": "file",
                    "created_by": "system",
                    "created_at": self._db.clock(),
                }
                if self._db.insert_ignore(session, table, values):
                    self._db.audit(
                        session,
                        "tag.defined",
                        entity_type="tag",
                        entity_id=tag,
                        actor="system",
                        payload={"description": description, "source": "file"},
                        into=audits,
                    )
            if audits.events:
                self._db.audit_many(session, audits.events)
            return len(audits.events)

        return await self._db.run(add_missing)

    async def add_vocabulary(
        self, tag: str, *, description: str, actor: str
    ) -> TagVocabularyRecord:
        """An admin extends the vocabulary; Conflict when the tag exists (also when
        another admin defines it at the same moment: the INSERT decides, not a read)."""

        def work(session: Session) -> TagVocabularyRecord:
            record = TagVocabularyRecord(
                tag=tag,
                description=description,
                source="admin",
                created_by=actor,
                created_at=self._db.clock(),
            )
            table = TagVocabularyRecord.__table__  # type: ignore[attr-defined]
            if not self._db.insert_ignore(session, table, record.model_dump()):
                raise Conflict(f"tag {tag!r} exists", field="tag")
            self._db.audit(
                session,
                "tag.defined",
                entity_type="tag",
                entity_id=tag,
                actor=actor,
                payload={"description": description},
            )
            return record

        return await self._db.run(work)

    async def vocabulary(self) -> list[TagVocabularyRecord]:
        """The tags adjudicators may use, in code point order (``storage.bytewise``)."""
        return await self._db.run_read(self.read_vocabulary)

    @staticmethod
    def read_vocabulary(session: Session) -> list[TagVocabularyRecord]:
        """``vocabulary`` in the caller's ``session``."""
        query = select(TagVocabularyRecord).order_by(bytewise(col(TagVocabularyRecord.tag)))
        return list(session.execute(query).scalars())

    async def add(
        self, grading_id: str, *, tag: str, note: str, author_id: str, author_name: str
    ) -> FailureTagRecord:
        """Tag what the agent got wrong; the tag must be in the vocabulary. Superseded
        (a 409) on a grading a promoted regrade replaced: tag the one in force. Conflict
        naming ``tag`` when the author's same tag with the same note is in force on the
        grading already (``FailureTagRecord.identity``; a form sent twice stores one)."""

        def work(session: Session) -> FailureTagRecord:
            grading = _locked(self._db, session, grading_id)
            if grading is None:
                raise NotFound(f"no grading {grading_id}")
            refuse_superseded(session, grading, instead="tag that one")
            if session.get(TagVocabularyRecord, tag) is None:
                raise InvalidReview(f"{tag!r} is not in the failure-tag vocabulary", field="tag")
            record = FailureTagRecord(
                grading_id=grading_id,
                tag=tag,
                note=note,
                author_id=author_id,
                author_name=author_name,
                created_at=self._db.clock(),
            )
            same = _in_force(session, grading_id, record)
            if same is not None:
                raise Conflict(
                    f"{author_name} tagged this grading {tag!r} with this note already "
                    f"(tag {same.id})",
                    field="tag",
                )
            session.add(record)
            grading.revision += 1  # the grading object shows its tags: a new ETag
            session.flush()
            self._db.audit(
                session,
                "grading.tagged",
                entity_type="grading",
                entity_id=grading_id,
                actor=author_id,
                payload={
                    "tag": tag,
                    "tag_id": record.id,
                    "note": note,
                    "revision": grading.revision,
                },
                covers=[grading_id],
                rows=[record],
            )
            return record

        return await self._db.run(work)

    async def remove(self, grading_id: str, tag_id: int, *, actor: str) -> None:
        """Mark a tag removed (kept for the record). Superseded (a 409) on a grading a
        promoted regrade replaced: its copy on the grading in force is the one reports
        count, and is removed there."""

        def work(session: Session) -> None:
            grading = _locked(self._db, session, grading_id)
            record = session.get(FailureTagRecord, tag_id)
            missing = record is None or record.grading_id != grading_id or record.removed_at
            if grading is None or record is None or missing:
                raise NotFound(f"no tag {tag_id} on grading {grading_id}")
            refuse_superseded(session, grading, instead="remove the tag there")
            record.removed_at, record.removed_by = self._db.clock(), actor
            grading.revision += 1
            session.flush()
            self._db.audit(
                session,
                "grading.untagged",
                entity_type="grading",
                entity_id=grading_id,
                actor=actor,
                payload={"tag": record.tag, "tag_id": tag_id, "revision": grading.revision},
                covers=[grading_id],
                rows=[record],
            )

        return await self._db.run(work)


def _locked(db: Database, session: Session, grading_id: str) -> GradingRecord | None:
    """The grading, its row locked on PostgreSQL until the transaction ends: its revision
    moves with each tag, never lost to a write beside it."""
    return session.get(GradingRecord, grading_id, with_for_update=db.postgres)


def _in_force(session: Session, grading_id: str, tag: FailureTagRecord) -> FailureTagRecord | None:
    """The tag in force on the grading that is one with ``tag`` (the same tag, author and
    note), if any. The caller holds the grading's row lock: no twin is added meanwhile."""
    query = select(FailureTagRecord).where(
        col(FailureTagRecord.grading_id) == grading_id,
        col(FailureTagRecord.tag) == tag.tag,
        col(FailureTagRecord.removed_at).is_(None),
    )
    return next(
        (t for t in session.execute(query).scalars() if t.identity() == tag.identity()), None
    )
