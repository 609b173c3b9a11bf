"""Rendering a page: every template gets who is signed in and the CSRF token its forms carry."""

from __future__ import annotations

from typing import Any

from litestar.response import Template

from api.web.sessions import CSRF_FIELD, SignedIn

__all__ = ["page"]


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
