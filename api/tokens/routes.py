"""Tokens and their principals (admins only)."""

from __future__ import annotations

from typing import Any

from litestar import get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from api.http.auth import require
from api.service.principal import Principal, Role
from api.service.request_types import DatetimeText
from api.service.services import Services
from api.tokens import use_cases
from storage import TokenRecord

__all__ = ["create_token", "list_tokens", "revoke_token"]


class TokenCreate(BaseModel):
    """A new token for a named principal."""

    model_config = ConfigDict(extra="forbid")

    name: StrictStr = Field(min_length=1, max_length=128)  # the column's length
    role: Role
    expires_at: DatetimeText | None = None
    inline_ground_truth: StrictBool = Field(
        default=False,
        description="may send its own ground truth (SRE_JUDGE_INLINE_GROUND_TRUTH=per_token)",
    )


def _public(record: TokenRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "name": record.name,
        "role": record.role,
        "created_at": record.created_at,
        "expires_at": record.expires_at,
        "revoked_at": record.revoked_at,
        "inline_ground_truth": record.inline_ground_truth,
    }


@post("/v1/tokens", guards=[require("admin")], operation_id="createToken", status_code=201)
async def create_token(
    data: JSONBody[TokenCreate],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Create a token; its secret is in this answer only."""
    plaintext, record = await use_cases.issue_token(
        services.store,
        actor=principal.id,
        name=data.name,
        role=data.role,
        expires_at=data.expires_at,
        inline_ground_truth=data.inline_ground_truth,
    )
    return {**_public(record), "token": plaintext}


@get("/v1/tokens", guards=[require("admin")], operation_id="listTokens")
async def list_tokens(services: NamedDependency[Services]) -> list[dict[str, Any]]:
    """Every token, without secrets."""
    return [_public(r) for r in await use_cases.all_tokens(services.store)]


@post(
    "/v1/tokens/{token_id:str}/revoke",
    guards=[require("admin")],
    operation_id="revokeToken",
    status_code=200,
)
async def revoke_token(
    token_id: FromPath[str],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
) -> dict[str, Any]:
    """Revoke a token: it gets 401 from now on."""
    return _public(await use_cases.revoke_token(services.store, token_id, actor=principal.id))
