"""Fixtures of the workbench tests: the API tests' app and tokens, and signing in."""

from __future__ import annotations

import re

from tests.api.conftest import api_client, tokens
from tests.support.app_client import AppClient

__all__ = ["api_client", "csrf_of", "sign_in", "tokens"]

_CSRF = re.compile(r'name="_csrf" value="([^"]+)"')


def csrf_of(html: str) -> str:
    """The CSRF token of the first form on a page."""
    match = _CSRF.search(html)
    assert match, "no CSRF field on the page"
    return match.group(1)


async def sign_in(client: AppClient, headers: dict[str, str]) -> str:
    """Sign ``client`` in with the token of ``headers``; returns the session's CSRF token."""
    form = await client.get("/login")
    token = headers["Authorization"].split(" ", 1)[1]
    response = await client.post(
        "/login",
        data={"token": token, "_csrf": csrf_of(form.text), "next": "/gradings"},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return csrf_of((await client.get("/gradings")).text)
