"""Errors of the use cases: what went wrong in the caller's terms, without HTTP or exit codes.

The HTTP edge maps them to problem+json (``api.http.problems``), the command line to
exit statuses (``api.cli.edge``), each in one table. ``field`` names the input at fault.
The errors of the layers below (``storage.errors``, ``judge.errors``) are domain errors
too and are mapped at the same two edges.
"""

from __future__ import annotations

import re

from judge.masking import mask_passwords

__all__ = [
    "InvalidRequest",
    "NotPermitted",
    "ServiceError",
    "UnknownReference",
    "body_path",
    "invalid_judge",
]

#: a segment pydantic adds to an error's place for the member of a union it tried
#: (``trace.str``, ``trace.list[dict[str,any]].1``): in no request body
_UNION_MEMBER = re.compile(
    r"(?:str|int|float|bool|none|(?:list|dict|tuple|set|literal|function-\w+)\[.*\])"
)


def body_path(key: str) -> str:
    """A place in a request body, given as its dotted segments (a validation error's
    ``loc`` joined with ``.``), as the JSON path every ``field`` is written in: union
    members left out, list positions written ``[i]`` (``trace[1]``, ``tags[0]``)."""
    path = ""
    for segment in key.split("."):
        if _UNION_MEMBER.fullmatch(segment):
            continue
        path += f"[{segment}]" if segment.isdigit() and path else ("." if path else "") + segment
    return path or key


class ServiceError(Exception):
    """Base of the use cases' errors: a title, a detail, and the field at fault if any."""

    title = "Invalid request"

    def __init__(self, detail: str, *, field: str | None = None, title: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.title = title or type(self).title


class InvalidRequest(ServiceError):
    """The request cannot be carried out as given (a bad or contradictory value)."""


def invalid_judge(error: ValueError) -> InvalidRequest:
    """The refusal of a judge spec that does not parse, naming ``judge``: its message
    quotes the spec with the credentials of its URLs masked (an answer, and any log of
    it, never carries a password)."""
    return InvalidRequest(mask_passwords(str(error)), field="judge", title="Invalid judge")


class NotPermitted(ServiceError):
    """The caller's token may not do this here (a deployment setting or a grant says so)."""

    title = "Forbidden"


class UnknownReference(InvalidRequest):
    """The request names a rubric, scenario or judge that does not exist."""
