"""Signing in to the workbench: an API token exchanged for a server-side session.

The browser holds only a random session id in an HttpOnly, SameSite=Strict cookie
(Secure when the request came over TLS, and then named ``__Host-srej_session``: a browser
takes a cookie of that name only from this very host, so a sibling host of the same site
cannot plant its own session in a visitor's browser); the database holds its hash, its
token and its CSRF token. Every unsafe request must send that CSRF token back, as the ``_csrf``
form field or the ``X-CSRF-Token`` header, and come from a page of this origin, as the
browser says (:func:`check_same_origin`).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.datastructures import Cookie
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from api.http.auth import Guard
from api.http.same_origin import foreign_page
from api.service.principal import Principal, Role
from api.service.services import Services
from api.web.input_guard import form_sent
from storage import TokenRecord

__all__ = [
    "CSRF_FIELD",
    "SESSION_COOKIE",
    "SESSION_LIFETIME",
    "TLS_SESSION_COOKIE",
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
#: the session cookie's name over TLS: only this host can set it (Secure, Path=/, no Domain)
TLS_SESSION_COOKIE = "__Host-srej_session"
CSRF_FIELD = "_csrf"
CSRF_HEADER = "x-csrf-token"
#: a session ends this long after sign-in at the latest
SESSION_LIFETIME = timedelta(hours=12)
_SAFE = frozenset({"GET", "HEAD", "OPTIONS"})


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


def _cookie_name(connection: ASGIConnection[Any, Any, Any, Any]) -> str:
    """The session cookie's name for the scheme ``connection`` came over."""
    return TLS_SESSION_COOKIE if connection.url.scheme == "https" else SESSION_COOKIE


def session_cookie(request: Request[Any, Any, Any], value: str, *, max_age: int) -> Cookie:
    """The session cookie: HttpOnly, SameSite=Strict, and over TLS Secure under the
    ``__Host-`` name; ``max_age=0`` ends it."""
    return Cookie(
        key=_cookie_name(request),
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
    # over TLS only the __Host- cookie counts: one named srej_session may be a sibling
    # host's, planted for the whole site
    session_id = connection.cookies.get(_cookie_name(connection))
    services: Services = connection.app.state.services
    found = await services.store.web_sessions.resolve(session_id) if session_id else None
    if found is None:
        raise NotAuthorizedException("sign in first")
    record, token = found
    who = SignedIn(principal=principal_of(token), csrf=record.csrf, session_id=session_id or "")
    connection.scope.setdefault("state", {})["signed_in"] = who
    return who


async def check_csrf(request: Request[Any, Any, Any], expected: str) -> None:
    """403 unless the request carries ``expected`` in its header or form; 415 for a body
    that is not a URL-encoded form (:func:`api.web.input_guard.form_sent`)."""
    sent = request.headers.get(CSRF_HEADER)
    if sent is None and await form_sent(request):
        value = (await request.form()).get(CSRF_FIELD)
        sent = value if isinstance(value, str) else None
    if not sent or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise PermissionDeniedException("the form's CSRF token is missing or out of date")


def check_same_origin(request: Request[Any, Any, Any]) -> None:
    """403 unless an unsafe request came from a page of this origin, as the browser says
    (:func:`api.http.same_origin.foreign_page`: its ``Sec-Fetch-Site``, else its
    ``Origin`` against the scheme and ``Host`` the request reached the app with, the same
    origin the session cookie's ``Secure`` follows)."""
    sender = foreign_page(request)
    if sender is not None:
        raise PermissionDeniedException(f"this form was sent from {sender}")


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
