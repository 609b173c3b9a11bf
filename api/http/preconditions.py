"""Conditional writes: the revision an ``If-Match`` header names."""

from __future__ import annotations

import re
from typing import Annotated, Any

from litestar import Request
from litestar.params import HeaderParameter

from api.http.problems import ApiProblem

__all__ = ["expected_revision", "if_match_value"]

#: this service's ETags: a revision in quotes, as written (no leading zero, at most 18 digits)
_ETAG = re.compile(r'"(0|[1-9][0-9]{0,17})"')


async def if_match_value(
    request: Request[Any, Any, Any],
    if_match_line: Annotated[str | None, HeaderParameter(name="If-Match", required=False)] = None,
) -> str | None:
    """Dependency ``if_match``: the request's ``If-Match``, every field line of it.

    Lines of a list-based field are one comma-separated list (RFC 9110 5.3), so two lines
    ``"1"`` and ``"5"`` are read as ``"1", "5"`` (which :func:`expected_revision` refuses),
    never as the first line alone. ``if_match_line`` (the first line) declares the header
    in the OpenAPI document.
    """
    if if_match_line is None:
        return None
    return ", ".join(request.headers.getall("If-Match"))


def expected_revision(if_match: str | None, *, what: str) -> int:
    """The revision ``If-Match`` holds: 428 without one, 412 when it is not ours.

    ``what`` says what needs it, e.g. ``"overrides need If-Match with the grading's ETag"``.
    """
    if if_match is None:
        raise ApiProblem(428, "Precondition required", what, field="If-Match")
    if if_match.strip() == "*" or "," in if_match:
        # a write must name what it read: "*" or a list could undo a change unseen
        raise ApiProblem(
            412,
            "Precondition failed",
            "If-Match must hold the one ETag you read; a list or * is not taken",
            field="If-Match",
        )
    # If-Match compares strongly (RFC 9110 13.1.1), character by character: a weak ETag,
    # an unquoted one or "01" for "1" never matches; ASCII digits only
    found = _ETAG.fullmatch(if_match.strip())
    if found is None:
        raise ApiProblem(
            412,
            "Precondition failed",
            f"If-Match {if_match!r} is not an ETag of this service",
            field="If-Match",
        )
    return int(found[1])
