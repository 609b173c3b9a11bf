"""Workbench sessions: a signed-in browser holds a random id; only its SHA-256 is stored.

A session belongs to the API token it was opened with: it lives no longer than the
token, so revoking or expiring the token ends every session opened with it. Signing in
and out are audit events (``session.opened``, ``session.ended``) by the token, naming
the session by its stored hash.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from sqlalchemy import String, delete, select
from sqlalchemy.orm import Session
from sqlmodel import Field, SQLModel, col

from storage.canonical import iso_utc
from storage.database import Database
from storage.tables import TokenRecord, _created

__all__ = ["WebSessionRecord", "WebSessionRepository"]


def _digest(session_id: str) -> str:
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class WebSessionRecord(SQLModel, table=True):
    """One signed-in browser: the hash of its cookie, its token and its CSRF token."""

    __tablename__ = "web_session"

    id_hash: str = Field(primary_key=True, sa_type=String(64))
    token_id: str = Field(sa_type=String(32), foreign_key="api_token.id", index=True)
    #: sent back with every form and script request of this session
    csrf: str = Field(sa_type=String(64))
    created_at: datetime = _created()
    expires_at: datetime = _created()


class WebSessionRepository:
    """Opening, resolving and ending workbench sessions."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db

    async def open(self, token_id: str, *, lifetime: timedelta) -> tuple[str, WebSessionRecord]:
        """A new session of ``token_id``: ``(session id for the cookie, record)``."""
        session_id = secrets.token_urlsafe(32)
        now = self._db.clock()
        record = WebSessionRecord(
            id_hash=_digest(session_id),
            token_id=token_id,
            csrf=secrets.token_urlsafe(32),
            created_at=now,
            expires_at=now + lifetime,
        )

        def opened(session: Session) -> None:
            session.add(record)
            session.flush()
            self._db.audit(
                session,
                "session.opened",
                entity_type="web_session",
                entity_id=record.id_hash,
                actor=token_id,
                payload={"expires_at": iso_utc(record.expires_at)},
            )

        await self._db.run(opened)
        return session_id, record

    async def resolve(self, session_id: str) -> tuple[WebSessionRecord, TokenRecord] | None:
        """The live session and its token, or None when the session is unknown, ended or
        expired, or its token revoked or expired."""
        query = (
            select(WebSessionRecord, TokenRecord)
            .join(TokenRecord, col(TokenRecord.id) == col(WebSessionRecord.token_id))
            .where(col(WebSessionRecord.id_hash) == _digest(session_id))
        )
        row = await self._db.run_read(lambda session: session.execute(query).one_or_none())
        if row is None:
            return None
        record, token = row
        now = self._db.clock()
        if record.expires_at <= now or token.revoked_at is not None:
            return None
        if token.expires_at is not None and token.expires_at <= now:
            return None
        return record, token

    async def end(self, session_id: str) -> None:
        """End a session, audited as ``session.ended`` by its token (nothing happens when
        it is unknown or already ended)."""
        digest = _digest(session_id)
        query = (
            delete(WebSessionRecord)
            .where(col(WebSessionRecord.id_hash) == digest)
            .returning(col(WebSessionRecord.token_id))
        )

        def ended(session: Session) -> None:
            token_id = session.execute(query).scalar_one_or_none()
            if token_id is not None:
                self._db.audit(
                    session, "session.ended", entity_type="web_session", entity_id=digest,
                    actor=token_id, payload={"reason": "signed out"},
                )  # fmt: skip

        await self._db.run(ended)
