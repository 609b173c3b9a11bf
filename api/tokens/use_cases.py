"""API tokens: each belongs to a named principal with one role; the secret is shown once.

Issuing, listing and revoking, over a store: the HTTP routes pass the service's store
and the caller's id, the command line its own store (the audit names ``system`` for a
token created there and ``cli`` for one revoked there, as it always has).
"""

from __future__ import annotations

from datetime import datetime

from api.service.errors import InvalidRequest
from api.service.request_types import LATEST
from storage import Store, TokenRecord

__all__ = ["all_tokens", "issue_token", "revoke_token"]


async def issue_token(
    store: Store,
    *,
    actor: str,
    name: str,
    role: str,
    expires_at: datetime | None = None,
    inline_ground_truth: bool = False,
) -> tuple[str, TokenRecord]:
    """A new token (plaintext, record) issued by ``actor``; expiry must be a future, zoned
    time."""
    if expires_at is not None:
        if expires_at.utcoffset() is None:
            raise InvalidRequest("expires_at needs a time zone", field="expires_at")
        if expires_at <= datetime.now(expires_at.tzinfo):
            raise InvalidRequest("expires_at is in the past", field="expires_at")
        if expires_at >= LATEST:  # compared as stored, in UTC, whatever its offset
            raise InvalidRequest(
                f"expires_at is not before {LATEST.date().isoformat()} (UTC)", field="expires_at"
            )
    return await store.tokens.create(
        name=name,
        role=role,
        expires_at=expires_at,
        inline_ground_truth=inline_ground_truth,
        actor=actor,
    )


async def all_tokens(store: Store) -> list[TokenRecord]:
    """Every token, without secrets (only their hashes are stored)."""
    return list(await store.tokens.all())


async def revoke_token(store: Store, token_id: str, *, actor: str) -> TokenRecord:
    """Revoke a token: it gets 401 from now on; NotFound when there is none."""
    return await store.tokens.revoke(token_id, actor=actor)
