"""Rendering a page: every template gets who is signed in and the CSRF token its forms
carry, and shows a time one way (:func:`utc_time`, the templates' ``utc`` filter)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from litestar.response import Template

from api.web.sessions import CSRF_FIELD, SignedIn

__all__ = ["page", "utc_time"]


def page(name: str, who: SignedIn | None, *, status_code: int = 200, **context: Any) -> Template:
    """The template ``name`` with ``context``, ``me`` (the principal) and ``csrf``."""
    return Template(
        template_name=name,
        context={
            **context,
            "me": who.principal if who else None,
            "csrf": who.csrf if who else "",
            "csrf_field": CSRF_FIELD,
        },
        status_code=status_code,
        media_type="text/html",
    )


def utc_time(value: datetime, *, seconds: bool = False) -> str:
    """A stored time as every page shows it, in UTC and saying so:
    ``2025-06-01 14:03 UTC`` (``2025-06-01 14:03:05 UTC`` with ``seconds``)."""
    if value.utcoffset() is not None:  # stored times are UTC; a naive one is taken as UTC
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")
