"""Input no database can store, refused at the edge before any handler runs.

PostgreSQL cannot store a NUL character in text (nor ``\\u0000`` in JSON), no database
stores a date past year 9999 once moved to UTC, and a JSON document nested thousands of
levels deep exhausts the parsers' recursion. Each is answered here, for every route at
once, with a problem+json naming the field: 422 for a value, 400 for a document. The
checks are cheap on ordinary requests: a body is parsed a second time only when its
bytes hint at a NUL, and its depth is measured only when it holds many brackets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from litestar import Request

from api.http.problems import ApiProblem
from api.service.schemas import EARLIEST, LATEST

__all__ = [
    "MAX_JSON_DEPTH",
    "TEXT_BODIES",
    "check_params",
    "refuse_unstorable_input",
    "unstorable",
]

#: deeper JSON documents are refused with 400
MAX_JSON_DEPTH = 32
_DATE_PARAM = re.compile(r"(^|\.)created_(after|before)$")
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: routes whose body is a text document, with the media types they take (the route
#: checks what it parses itself)
TEXT_BODIES = {
    "/v1/scenarios:bulk": frozenset(
        {"application/jsonl", "application/x-ndjson", "application/yaml", "application/x-yaml",
         "text/yaml", "text/plain"}
    ),
}  # fmt: skip


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None."""
    if "\x00" in text:
        return "contains a NUL character"
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        return "contains a lone surrogate, not a character"
    return None


def _refuse(field: str, message: str, status: int = 422) -> ApiProblem:
    title = "Invalid request" if status == 422 else "Malformed request"
    return ApiProblem(status, title, f"{field}: {message}", field=field)


def _check_date(name: str, value: str) -> None:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise _refuse(name, "must be an ISO 8601 date-time") from None
    aware = when if when.tzinfo else when.replace(tzinfo=UTC)
    try:
        in_range = EARLIEST <= aware <= LATEST
    except OverflowError:
        in_range = False
    if not in_range:
        raise _refuse(name, f"must lie between {EARLIEST.year} and {LATEST.year}")


def check_params(request: Request[Any, Any, Any]) -> None:
    """422 naming the query or path parameter that cannot be stored (or a bad date)."""
    for name, value in request.query_params.multi_items():
        problem = unstorable(name) or unstorable(str(value))
        if problem:
            raise _refuse(name, problem)
        if _DATE_PARAM.search(name):
            _check_date(name, str(value))
    for name, value in request.path_params.items():
        problem = unstorable(str(value))
        if problem:
            raise _refuse(name, problem)


def _depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects, strings left out."""
    depth = deepest = 0
    for byte in _STRING.sub(b'""', body):
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every (field path, string) of a decoded JSON value, keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            yield where, str(key)
            yield from _strings(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def _check_body(body: bytes) -> None:
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH and _depth(body) > MAX_JSON_DEPTH:
        raise _refuse("body", f"JSON nested deeper than {MAX_JSON_DEPTH} levels", status=400)
    lowered = body.lower()
    if b"\\u0000" not in lowered and b"\\ud" not in lowered:
        return
    try:
        document = json.loads(body)
    except ValueError:
        return  # malformed: the route's own parsing answers 400
    for field, text in _strings(document, ""):
        problem = unstorable(text)
        if problem:
            raise _refuse(field or "body", problem)


async def refuse_unstorable_input(request: Request[Any, Any, Any]) -> None:
    """``before_request`` hook: 422 on unstorable input, 400 for a document too deep, 415
    for a body that is not JSON (every body of this API is)."""
    check_params(request)
    if request.method not in _BODY_METHODS:
        return
    body = await request.body()
    if not body:
        return
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type in TEXT_BODIES.get(request.url.path, ()):
        return
    if media_type != "application/json" and not media_type.endswith("+json"):
        raise ApiProblem(
            415,
            "Unsupported media type",
            f"Content-Type: the body must be application/json, not {media_type or 'unstated'}",
            field="Content-Type",
        )
    _check_body(body)
