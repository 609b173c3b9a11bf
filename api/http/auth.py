"""Bearer tokens: the guard of each route and the principal of each request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from api.service.principal import ANONYMOUS, Principal, Role

__all__ = ["bearer_principal", "current_principal", "require"]

Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]


async def _authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    cached = connection.scope.get("state", {}).get("principal")
    if isinstance(cached, Principal):
        return cached
    services = connection.app.state.services
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header and services.settings.allow_anonymous:
        principal = ANONYMOUS
    elif scheme.lower() != "bearer" or not token.strip():
        raise NotAuthorizedException("a bearer token is required: Authorization: Bearer <token>")
    else:
        record = await services.store.tokens.authenticate(token.strip())
        if record is None:
            raise NotAuthorizedException("the token is unknown, revoked or expired")
        principal = Principal(
            id=record.id,
            name=record.name,
            role=record.role,
            inline_ground_truth=record.inline_ground_truth,
        )
    connection.scope.setdefault("state", {})["principal"] = principal
    return principal


def require(role: Role) -> Guard:
    """A guard admitting principals of ``role`` or higher."""

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        principal = await _authenticate(connection)
        if not principal.at_least(role):
            raise PermissionDeniedException(f"this route needs the {role} role or higher")

    guard.required_role = role  # type: ignore[attr-defined]  # read by api.http.openapi
    return guard


async def current_principal(request: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    """Dependency: the authenticated principal (the route's guard ran first)."""
    return await _authenticate(request)


async def bearer_principal(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal | None:
    """The principal of the request's bearer token; None without one or with a bad one.

    For routes open to anyone that show more to some roles: the request is never refused
    for its token, and anonymous use (``SRE_JUDGE_ALLOW_ANONYMOUS``) shows no more.
    """
    if not connection.headers.get("authorization"):
        return None
    try:
        return await _authenticate(connection)
    except NotAuthorizedException:
        return None
