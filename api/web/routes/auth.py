"""Signing in and out of the workbench."""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated, Any

from litestar import Request, get, post
from litestar.datastructures import Cookie
from litestar.di import NamedDependency
from litestar.enums import RequestEncodingType
from litestar.params import Body
from litestar.response import Redirect, Template

from api.service.services import Services
from api.web.pages import page
from api.web.sessions import (
    SESSION_LIFETIME,
    SignedIn,
    session_cookie,
    sign_in,
    signed_in,
    web_require,
)

__all__ = ["LOGIN_CSRF_COOKIE", "login_form", "login_submit", "logout", "safe_next"]

#: the sign-in form's own CSRF token (double submit: this cookie and the form field)
LOGIN_CSRF_COOKIE = "srej_login_csrf"


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path of this app, never another host."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


def _login_page(
    request: Request[Any, Any, Any], *, next_path: str, error: str = "", status_code: int = 200
) -> Template:
    token = secrets.token_urlsafe(24)
    response = page(
        "login.html", None, status_code=status_code, login_csrf=token, next=next_path, error=error
    )
    response.cookies.append(
        Cookie(
            key=LOGIN_CSRF_COOKIE,
            value=token,
            path="/login",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
    )
    return response


@get("/login", include_in_schema=False)
async def login_form(request: Request[Any, Any, Any], next: str | None = None) -> Template:
    """The sign-in form: one field, an API token."""
    return _login_page(request, next_path=safe_next(next))


@post("/login", include_in_schema=False, status_code=303)
async def login_submit(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    data: Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)],
) -> Redirect | Template:
    """Exchange the token for a session cookie and go on; the form again when refused."""
    next_path = safe_next(data.get("next"))
    expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    sent = data.get("_csrf", "")
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        return _login_page(
            request,
            next_path=next_path,
            error="The form expired; please sign in again.",
            status_code=403,
        )
    opened = await sign_in(services, data.get("token", ""))
    if opened is None:
        return _login_page(
            request,
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
