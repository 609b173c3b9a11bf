"""API tokens: each belongs to a named principal with one role; the secret is shown once."""

from __future__ import annotations

from datetime import datetime

from api.service.errors import InvalidRequest
from api.service.principal import Principal
from api.service.request_types import LATEST
from api.service.services import Services
from storage import TokenRecord

__all__ = ["issue_token"]


async def issue_token(
    services: Services,
    principal: Principal,
    *,
    name: str,
    role: str,
    expires_at: datetime | None = None,
    inline_ground_truth: bool = False,
) -> tuple[str, TokenRecord]:
    """A new token (plaintext, record) issued by ``principal``; expiry must be a future,
    zoned time."""
    if expires_at is not None:
        if expires_at.utcoffset() is None:
            raise InvalidRequest("expires_at needs a time zone", field="expires_at")
        if expires_at <= datetime.now(expires_at.tzinfo):
            raise InvalidRequest("expires_at is in the past", field="expires_at")
        if expires_at.year >= LATEST.year:
            raise InvalidRequest(f"expires_at is after {LATEST.year}", field="expires_at")
    return await services.store.tokens.create(
        name=name,
        role=role,
        expires_at=expires_at,
        inline_ground_truth=inline_ground_truth,
        actor=principal.id,
    )
