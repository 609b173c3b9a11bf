"""Signing in to the workbench: an API token exchanged for a server-side session.

The browser holds only a random session id in an HttpOnly, SameSite=Strict cookie
(Secure when the request came over TLS); the database holds its hash, its token and
its CSRF token. Every unsafe request must send that CSRF token back, as the ``_csrf``
form field or the ``X-CSRF-Token`` header, and come from a page of this origin, as the
browser says (:func:`check_same_origin`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from api.http.auth import Guard
from api.service.principal import Principal, Role
from api.service.services import Services
from storage import TokenRecord

__all__ = [
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "SESSION_LIFETIME",
    "SignedIn",
    "check_csrf",
    "check_same_origin",
    "principal_of",
    "session_cookie",
    "sign_in",
    "signed_in",
    "web_require",
]

SESSION_COOKIE = "srej_session"
CSRF_FIELD = "_csrf"
CSRF_HEADER = "x-csrf-token"
#: a session ends this long after sign-in at the latest
SESSION_LIFETIME = timedelta(hours=12)
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
#: what ``Sec-Fetch-Site`` says of a request made by a page of this origin, or by the
#: user (a bookmark, the address bar)
_OWN_SITE = frozenset({"same-origin", "none"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class SignedIn:
    """The signed-in browser: who it is and the CSRF token its forms carry."""

    principal: Principal
    csrf: str
    session_id: str


def principal_of(token: TokenRecord) -> Principal:
    """The principal a token stands for."""
    return Principal(
        id=token.id,
        name=token.name,
        role=token.role,  # type: ignore[arg-type]
        inline_ground_truth=token.inline_ground_truth,
    )


def session_cookie(request: Request[Any, Any, Any], value: str, *, max_age: int) -> Cookie:
    """The session cookie: HttpOnly, SameSite=Strict, Secure over TLS; ``max_age=0`` ends it."""
    return Cookie(
        key=SESSION_COOKIE,
        value=value,
        path="/",
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


async def _resolve(connection: ASGIConnection[Any, Any, Any, Any]) -> SignedIn:
    cached = connection.scope.get("state", {}).get("signed_in")
    if isinstance(cached, SignedIn):
        return cached
    session_id = connection.cookies.get(SESSION_COOKIE)
    services: Services = connection.app.state.services
    found = await services.store.web_sessions.resolve(session_id) if session_id else None
    if found is None:
        raise NotAuthorizedException("sign in first")
    record, token = found
    who = SignedIn(principal=principal_of(token), csrf=record.csrf, session_id=session_id or "")
    connection.scope.setdefault("state", {})["signed_in"] = who
    return who


async def check_csrf(request: Request[Any, Any, Any], expected: str) -> None:
    """403 unless the request carries ``expected`` in its header or form."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        value = (await request.form()).get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise PermissionDeniedException("the form's CSRF token is missing or out of date")


def _origin(url: str) -> tuple[str, str, int | None] | None:
    """``url``'s scheme, host and port (the scheme's default when none is written); None
    for no origin at all (``null``, or text that is no URL)."""
    try:
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:  # a port that is no number, or out of range
        return None
    if not scheme or not host:
        return None
    return scheme, host, port if port is not None else _DEFAULT_PORTS.get(scheme)


def check_same_origin(request: Request[Any, Any, Any]) -> None:
    """403 unless an unsafe request came from a page of this origin, as the browser says.

    A browser's ``Sec-Fetch-Site`` decides when sent: ``same-origin`` or ``none`` pass,
    anything else (``same-site``: a sibling host; ``cross-site``) is refused. A browser
    that sends none is judged by its ``Origin``: it must be the app's own
    ``scheme://host[:port]``, as the request reached the app (behind a reverse proxy, the
    ``Host`` it passes on and the scheme its trusted ``X-Forwarded-Proto`` names, the same
    origin the session cookie's ``Secure`` follows). A request with neither header comes
    from no browser (a script, a test client): it carries no cookie a browser attached
    behind its user's back."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site.strip().lower() in _OWN_SITE:
            return
        raise PermissionDeniedException("this form was sent from a page of another site")
    origin = request.headers.get("origin")
    if origin is None:
        return
    own = _origin(f"{request.url.scheme}://{request.url.netloc}")
    if own is None or _origin(origin) != own:
        raise PermissionDeniedException("this form was sent from a page of another origin")


def web_require(role: Role) -> Guard:
    """A guard: a live session of ``role`` or higher, and on unsafe methods a page of this
    origin (:func:`check_same_origin`) sending its CSRF token."""

    async def guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        who = await _resolve(connection)
        if not who.principal.at_least(role):
            raise PermissionDeniedException(f"this page needs the {role} role or higher")
        if not isinstance(connection, Request):  # a page's guard: no websocket gets by
            raise PermissionDeniedException("not a request")
        if connection.method not in _SAFE:
            check_same_origin(connection)
            await check_csrf(connection, who.csrf)

    return guard


async def signed_in(request: Request[Any, Any, Any]) -> SignedIn:
    """Dependency: the signed-in browser (the route's guard ran first)."""
    return await _resolve(request)


async def sign_in(services: Services, token: str) -> tuple[str, SignedIn] | None:
    """Open a session for a valid token: ``(cookie value, who)``, None when the token is
    unknown, revoked or expired."""
    record = await services.store.tokens.authenticate(token.strip())
    if record is None:
        return None
    session_id, session = await services.store.web_sessions.open(
        record.id, lifetime=SESSION_LIFETIME
    )
    return session_id, SignedIn(principal_of(record), session.csrf, session_id)
