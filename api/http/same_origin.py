"""Whether a request came from a page of this origin, as the browser says: one judgment
for the workbench's forms (``api.web.sessions.check_same_origin``) and for anonymous
use (``api.http.auth``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from litestar.connection import ASGIConnection

__all__ = ["foreign_page"]

#: what ``Sec-Fetch-Site`` says of a request made by a page of this origin, or by the
#: user (a bookmark, the address bar)
_OWN_SITE = frozenset({"same-origin", "none"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


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


def foreign_page(connection: ASGIConnection[Any, Any, Any, Any]) -> str | None:
    """What sent the request when the browser says it was a page of another origin
    (``"a page of another site"``, ``"a page of another origin"``); None when it was a
    page of this origin, the user, or no browser at all.

    A browser's ``Sec-Fetch-Site`` decides when sent: ``same-origin`` or ``none`` pass,
    anything else (``same-site``: a sibling host or another port; ``cross-site``) is
    foreign. A browser that sends none is judged by its ``Origin``: it must be the app's
    own ``scheme://host[:port]`` (default ports filled in), as the request reached the
    app (behind a reverse proxy, the ``Host`` it passes on and the scheme its trusted
    ``X-Forwarded-Proto`` names). A request with neither header comes from no browser (a
    script, a test client): it carries nothing a browser attached behind its user's back.
    """
    fetch_site = connection.headers.get("sec-fetch-site")
    if fetch_site is not None:
        return None if fetch_site.strip().lower() in _OWN_SITE else "a page of another site"
    origin = connection.headers.get("origin")
    if origin is None:
        return None
    own = _origin(f"{connection.url.scheme}://{connection.url.netloc}")
    if own is None or _origin(origin) != own:
        return "a page of another origin"
    return None
