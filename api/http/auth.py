"""Bearer tokens: the guard of each route and the principal of each request."""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable
from typing import Any

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from api.http.same_origin import foreign_page
from api.service.principal import ANONYMOUS, Principal, Role

__all__ = [
    "LOCAL_HOSTS",
    "bearer_is_admin",
    "bearer_principal",
    "check_anonymous_use",
    "current_principal",
    "require",
]

#: the names of this machine's loopback interface: where anonymous use is allowed
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def check_anonymous_use(allow_anonymous: bool, host: str) -> None:
    """Refuse tokenless use (``SRE_JUDGE_ALLOW_ANONYMOUS``) on any host but a loopback
    one, naming the settings; ValueError."""
    if allow_anonymous and host not in LOCAL_HOSTS:
        raise ValueError(
            "SRE_JUDGE_ALLOW_ANONYMOUS: tokenless use is refused unless serve listens on "
            f"127.0.0.1 (SRE_JUDGE_HOST, --host, is {host!r})"
        )


Guard = Callable[[ASGIConnection[Any, Any, Any, Any], BaseRouteHandler], Awaitable[None]]


async def _authenticate(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    cached = connection.scope.get("state", {}).get("principal")
    if isinstance(cached, Principal):
        return cached
    services = connection.app.state.services
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if not header and services.settings.allow_anonymous:
        _refuse_foreign_page(connection)
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


def _host_name(authority: str) -> str:
    """The host of a ``Host`` header, without its port."""
    if authority.startswith("["):
        return authority[1:].partition("]")[0]
    return authority.rpartition(":")[0] if authority.count(":") == 1 else authority


def _loopback_client(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether the request's client is this machine (a loopback address)."""
    client = connection.client
    try:
        return client is not None and ipaddress.ip_address(client.host).is_loopback
    except ValueError:  # not an address (a Unix socket's peer, a test's name)
        return False


def _refuse_foreign_page(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    """Anonymous use is for the person at this machine, not for every web page their
    browser opens: a request a page of another origin sends (as its ``Sec-Fetch-Site``
    or, without one, its whole ``Origin`` says: another site, or another local port; a
    bodiless POST needs no preflight) and a page that reached the port through a DNS
    name rebound to 127.0.0.1 (its ``Host`` is not a loopback name) get 403, not the
    anonymous admin; so does a request another machine sent through a reverse proxy on
    this one (its client, as the proxy's ``X-Forwarded-For`` names it, is not a loopback
    address: a proxy's default ``Host`` would pass the check above)."""
    if not _loopback_client(connection):
        raise PermissionDeniedException(
            "anonymous use answers requests from this machine only; send a bearer token"
        )
    host = _host_name(connection.headers.get("host", "").strip().lower())
    if host not in LOCAL_HOSTS:
        raise PermissionDeniedException(
            "anonymous use answers requests addressed to 127.0.0.1, localhost or [::1] "
            "only (Host header); send a bearer token"
        )
    sender = foreign_page(connection)
    if sender is not None:
        raise PermissionDeniedException(
            f"anonymous use does not answer requests {sender} sends; send a bearer token"
        )


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


async def bearer_is_admin(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    """Whether the request's bearer token is an admin's: what routes open to anyone show
    to admins only (judges' addresses, the judge's token counts). Never refuses: without
    a token, with a bad one, or when the token cannot be read (the database is away),
    it is not."""
    try:
        principal = await bearer_principal(connection)
    except Exception:  # the token is read from the database: the route still answers
        return False
    return principal is not None and principal.at_least("admin")
