"""API tokens: only the SHA-256 of a token's secret is stored; the plaintext is shown once."""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from storage.canonical import iso_utc
from storage.database import Database
from storage.errors import NotFound
from storage.tables import TokenRecord

__all__ = ["ROLES", "TOKEN_CACHE_SECONDS", "TOKEN_PREFIX", "TokenRepository", "hash_token"]

ROLES: Final = ("submitter", "adjudicator", "admin")
TOKEN_PREFIX: Final = "srej_"


#: how long a looked-up token is trusted without asking the database again: a token
#: revoked through another process stops working at most this long after
TOKEN_CACHE_SECONDS: Final = 0.5
#: tokens remembered at most (all of them are forgotten when it is full)
_CACHE_SIZE: Final = 1024


def hash_token(plaintext: str) -> str:
    """The stored form of a token: SHA-256 hex of its plaintext."""
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


class TokenRepository:
    """Creating, checking, revoking and listing API tokens."""

    def __init__(self, db: Database) -> None:
        """Work through ``db``."""
        self._db = db
        #: token hash -> (record, monotonic time it was read): see ``authenticate``
        self._recent: dict[str, tuple[TokenRecord, float]] = {}
        #: revocations committed through this repository: a read that a revocation's
        #: commit overtook is not remembered (it may hold the token as still valid)
        self._revocations = 0

    async def create(
        self,
        *,
        name: str,
        role: str,
        expires_at: datetime | None = None,
        inline_ground_truth: bool = False,
        actor: str = "system",
    ) -> tuple[str, TokenRecord]:
        """A new token: ``(plaintext, record)``; the plaintext is not kept anywhere.

        ``inline_ground_truth``: the token may send its own ground truth where the
        deployment grants that per token.
        """
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        plaintext = TOKEN_PREFIX + secrets.token_urlsafe(32)
        record = TokenRecord(
            id=secrets.token_hex(6),
            name=name,
            role=role,
            token_hash=hash_token(plaintext),
            created_at=self._db.clock(),
            expires_at=expires_at,
            inline_ground_truth=inline_ground_truth,
        )
        payload = {
            "token_id": record.id,
            "name": name,
            "role": role,
            "expires_at": iso_utc(expires_at) if expires_at else None,
            "inline_ground_truth": inline_ground_truth,
        }
        await self._db.run(self._add, record, payload, actor)
        return plaintext, record

    async def ensure(
        self, plaintext: str, *, name: str, role: str, actor: str = "system"
    ) -> tuple[bool, TokenRecord]:
        """Register a token whose plaintext the operator chose (e.g. a bootstrap secret).

        Only its hash is stored. Returns ``(created, record)``; a token with that hash
        that already exists is returned as it is, even when revoked (revoking sticks).
        """
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        digest = hash_token(plaintext)
        query = select(TokenRecord).where(col(TokenRecord.token_hash) == digest)

        def register(session: Session) -> tuple[bool, TokenRecord]:
            existing = session.execute(query).scalar_one_or_none()
            if existing is not None:
                return False, existing
            record = TokenRecord(
                id=secrets.token_hex(6),
                name=name,
                role=role,
                token_hash=digest,
                created_at=self._db.clock(),
            )
            payload = {"token_id": record.id, "name": name, "role": role, "expires_at": None}
            self._add(session, record, payload, actor)
            return True, record

        return await self._db.run(register)

    def _add(
        self, session: Session, record: TokenRecord, payload: dict[str, Any], actor: str
    ) -> None:
        """Store a new token's record and audit it (``token.created``, ``payload``)."""
        session.add(record)
        session.flush()
        self._db.audit(
            session,
            "token.created",
            entity_type="token",
            entity_id=record.id,
            actor=actor,
            payload=payload,
        )

    async def authenticate(self, plaintext: str) -> TokenRecord | None:
        """The token's record, or None when it is unknown, revoked or expired.

        A valid token's record is remembered for ``TOKEN_CACHE_SECONDS``, so a client
        sending many requests costs one lookup per interval, not one per request. A
        revocation through this repository takes effect at once; one through another
        process within that interval. Unknown and revoked tokens are not remembered.
        """
        digest = hash_token(plaintext)
        remembered = self._recent.get(digest)
        now = time.monotonic()
        if remembered is not None and now - remembered[1] < TOKEN_CACHE_SECONDS:
            record: TokenRecord | None = remembered[0]
        else:
            query = select(TokenRecord).where(col(TokenRecord.token_hash) == digest)
            revocations = self._revocations
            record = await self._db.run_read(
                lambda session: session.execute(query).scalar_one_or_none()
            )
            self._recent.pop(digest, None)
            current = revocations == self._revocations
            if current and record is not None and record.revoked_at is None:
                if len(self._recent) >= _CACHE_SIZE:
                    self._recent.clear()
                self._recent[digest] = (record, now)
        if record is None or record.revoked_at is not None:
            return None
        if record.expires_at is not None and record.expires_at <= self._db.clock():
            return None
        return record

    @staticmethod
    def read_names(session: Session, token_ids: Iterable[str]) -> dict[str, str]:
        """The names of those of ``token_ids`` that are tokens (revoked ones included)."""
        wanted = list(set(token_ids))
        if not wanted:
            return {}
        query = select(col(TokenRecord.id), col(TokenRecord.name)).where(
            col(TokenRecord.id).in_(wanted)
        )
        return {token_id: name for token_id, name in session.execute(query)}

    async def revoke(self, token_id: str, *, actor: str = "system") -> TokenRecord:
        """Revoke a token (revoking twice keeps the first time); NotFound when unknown."""

        def work(session: Session) -> TokenRecord:
            # locked on PostgreSQL: two revocations at once (two admins, the command line
            # and an admin) keep the first time and audit once, as SQLite's write lock does
            record = session.get(TokenRecord, token_id, with_for_update=self._db.postgres)
            if record is None:
                raise NotFound(f"token {token_id!r} does not exist")
            self._recent.pop(record.token_hash, None)  # no longer valid in this process
            if record.revoked_at is None:
                record.revoked_at = self._db.clock()
                session.flush()
                self._db.audit(
                    session,
                    "token.revoked",
                    entity_type="token",
                    entity_id=record.id,
                    actor=actor,
                    payload={"token_id": record.id, "name": record.name, "role": record.role},
                )
            return record

        revoked = await self._db.run(work)
        # again once committed: a request read the token while the revocation was being
        # written (and, before it, remembered it as valid)
        self._recent.pop(revoked.token_hash, None)
        self._revocations += 1
        return revoked

    async def all(self) -> list[TokenRecord]:
        """Every token, oldest first (hashes included; never plaintexts)."""
        query = select(TokenRecord).order_by(col(TokenRecord.created_at), col(TokenRecord.id))
        return await self._db.run_read(lambda session: list(session.execute(query).scalars()))
