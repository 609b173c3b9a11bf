"""Signing in and out of the workbench.

The sign-in form is protected by a signed token bound to a pre-session: the form's page
sets a random pre-session id in an HttpOnly cookie and puts in the form a token made of
its time of issue and an HMAC, keyed with the service key, of that id and time. A
sign-in is taken only with a token made for the cookie it comes with, and younger than
:data:`LOGIN_FORM_LIFETIME`: no one can make one up, as they could the value of an
unsigned double submit. Anyone can fetch a pair for themselves, though, and a sibling
host can plant its cookie in a victim's browser: so the form is taken only from a page
of this origin, as the browser says (``check_same_origin``), or a page of another
site could sign its visitor in as someone else.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Annotated, Any

from litestar import Request, get, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body, FromQuery
from litestar.response import Redirect, Template

from api.service.services import Services
from api.web.pages import page
from api.web.sessions import (
    SESSION_LIFETIME,
    SignedIn,
    check_same_origin,
    session_cookie,
    sign_in,
    signed_in,
    web_require,
)
from storage.keys import ServiceKey

__all__ = [
    "LOGIN_CSRF_COOKIE",
    "LOGIN_FORM_LIFETIME",
    "login_form",
    "login_submit",
    "login_token",
    "logout",
    "safe_next",
]

#: the sign-in form's pre-session id (its form carries a token signed for it)
LOGIN_CSRF_COOKIE = "srej_login_csrf"
#: seconds a sign-in form stays good
LOGIN_FORM_LIFETIME = 2 * 3600


def login_token(key: ServiceKey, pre_session: str, issued: int) -> str:
    """The sign-in form's token for ``pre_session``, issued at ``issued`` (epoch seconds):
    ``<issued>.<HMAC of both, keyed by the service key>``."""
    message = f"{pre_session}.{issued}".encode()
    mac = hmac.new(key.derive("login-csrf"), message, hashlib.sha256).digest()
    return f"{issued}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def _login_token_holds(key: ServiceKey, pre_session: str, token: str) -> bool:
    """Whether ``token`` was made for ``pre_session`` by this service, and is not stale."""
    issued, dot, _ = token.partition(".")
    readable = issued.isascii() and issued.isdigit() and len(issued) <= 12
    if not pre_session or not dot or not readable:
        return False
    if not 0 <= time.time() - int(issued) <= LOGIN_FORM_LIFETIME:
        return False
    expected = login_token(key, pre_session, int(issued))
    return hmac.compare_digest(token.encode(), expected.encode())


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of this app, never another host."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def _login_page(
    request: Request[Any, Any, Any],
    key: ServiceKey,
    *,
    next_path: str,
    error: str = "",
    status_code: int = 200,
) -> Template:
    pre_session = secrets.token_urlsafe(24)
    token = login_token(key, pre_session, int(time.time()))
    response = page(
        "login.html", None, status_code=status_code, login_csrf=token, next=next_path, error=error
    )
    response.cookies.append(
        Cookie(
            key=LOGIN_CSRF_COOKIE,
            value=pre_session,
            path="/login",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    )
    return response


@get("/login", include_in_schema=False)
async def login_form(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    next: FromQuery[str | None] = None,
) -> Template:
    """The sign-in form: one field, an API token."""
    return _login_page(request, services.store.db.key, next_path=safe_next(next))


@post("/login", include_in_schema=False, status_code=303)
async def login_submit(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect | Template:
    """Exchange the token for a session cookie and go on; the form again when refused
    (403 without it when another site's page sent it)."""
    check_same_origin(request)
    next_path = safe_next(data.get("next"))
    key = services.store.db.key
    pre_session = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not _login_token_holds(key, pre_session, data.get("_csrf", "")):
        return _login_page(
            request,
            key,
            next_path=next_path,
            error="The form expired; please sign in again.",
            status_code=403,
        )
    opened = await sign_in(services, data.get("token", ""))
    if opened is None:
        return _login_page(
            request,
            key,
            next_path=next_path,
            error="That token is unknown, revoked or expired.",
            status_code=401,
        )
    session_id, _ = opened
    max_age = int(SESSION_LIFETIME.total_seconds())
    return Redirect(
        next_path,
        status_code=303,
        cookies=[
            session_cookie(request, session_id, max_age=max_age),
            Cookie(key=LOGIN_CSRF_COOKIE, value="", path="/login", max_age=0),
        ],
    )


@post("/logout", guards=[web_require("submitter")], include_in_schema=False, status_code=303)
async def logout(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
) -> Redirect:
    """End the session here and in the database."""
    who: SignedIn = await signed_in(request)
    await services.store.web_sessions.end(who.session_id)
    return Redirect("/login", status_code=303, cookies=[session_cookie(request, "", max_age=0)])
