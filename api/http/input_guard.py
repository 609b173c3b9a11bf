"""Input no database can store, refused at the edge before any handler runs.

PostgreSQL cannot store a NUL character in text (nor ``\\u0000`` in JSON), and a JSON
document nested thousands of levels deep exhausts the parsers' recursion. Each is
answered here, for every route at once, with a problem+json naming the field: 422 for a
value, 400 for a document (nested too deep: the top-level field it is nested under). A
body the routes' parser would refuse as a whole for one value (a number out of range,
``NaN``, a string that is not UTF-8) is read here leniently to name that value's field.
A key given twice in one object is refused naming it (the routes' parser keeps its last
value, and which one the writer meant is unknown); bodies of items (the bulk scenario
load) are refused so by their own parser, which names the item. A body is read as sent,
never decoded: one in a content coding (``Content-Encoding: gzip``) is refused with 415
naming that header, on every route, file uploads and pages included. The checks are cheap on
ordinary requests: a body is parsed once more here, and its depth is measured only when
it holds many brackets.

A query is read here as sent (the raw query string), its names and values percent-decoded
as UTF-8 strictly: one that is not UTF-8 text (``%ff``, ``caf%e9``, the encoding of a lone
surrogate ``%ED%A0%80``) is refused with 400 naming it, where the routes' parser would
read U+FFFD in its place and filter on that other value (:func:`query_items`).

A date bound of a filter (``created_after``, ``a.created_before``, ...) is not refused for
its year: :func:`bound_query_dates` moves it within the years rows are stored in (see
:func:`api.service.request_types.bounded_date`), which selects the same rows.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, quote, unquote_plus

from litestar import Request

from api.http.problems import ApiProblem
from api.service.request_types import bounded_date, parse_datetime_text
from judge.inputs import RepeatedKey, load_json
from storage.storable import (
    MAX_INT32,
    MAX_JSON_DEPTH,
    TooManyDigits,
    field_path,
    printable,
    too_deep,
    unstorable,
    unstorable_value,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "TEXT_BODIES",
    "bound_query_dates",
    "check_params",
    "not_utf8",
    "percent_encoded",
    "query_items",
    "refuse_unstorable_input",
    "unstorable",
]

#: a number no parser reads as a finite value: NaN, Infinity, a 3-digit exponent, 300 digits
_NUMBER_HINT = re.compile(rb"NaN|Infinity|[eE][+-]?\d{3}|\d{300}")
_DATE_PARAM = re.compile(r"(^|\.)created_(after|before)$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: routes whose body is a text document, with the media types they take (the route
#: checks what it parses itself)
TEXT_BODIES = {
    "/v1/scenarios:bulk": frozenset(
        {"application/jsonl", "application/x-ndjson", "application/yaml", "application/x-yaml",
         "text/yaml", "text/x-yaml", "text/plain"}
    ),
}  # fmt: skip

#: routes whose JSON body is a list of items, a mapping holding that list under the key
#: given, or one item: a field is named ``items[i].field`` there, as the route names it
_ITEM_BODIES = {"/v1/scenarios:bulk": "scenarios"}


def _item_field(field: str, document: Any, key: str) -> str:
    """``field`` of a body of items (see :data:`_ITEM_BODIES`) named by its item:
    ``[1].x`` or ``<key>[1].x`` is ``items[1].x``, ``x`` of one item ``items[0].x``."""
    if isinstance(document, dict) and set(document) == {key}:
        field = field.removeprefix(key)
    elif isinstance(document, dict):
        return f"items[0].{field}"
    return f"items{field}" if field.startswith("[") else ""  # else the body as a whole


def _refuse(field: str, message: str, status: int = 422) -> ApiProblem:
    title = "Invalid request" if status == 422 else "Malformed request"
    shown = printable(field)  # a field named with a lone surrogate is shown escaped
    return ApiProblem(status, title, f"{shown}: {message}", field=shown)


def _check_date(name: str, value: str) -> None:
    try:
        parse_datetime_text(value)
    except ValueError:
        raise _refuse(name, "must be an ISO 8601 date-time") from None


def _bounded_part(part: bytes) -> bytes:
    name, sep, value = part.partition(b"=")
    if not sep or not _DATE_PARAM.search(unquote_plus(name.decode("latin-1"))):
        return part
    try:
        when = parse_datetime_text(unquote_plus(value.decode("utf-8")))
    except ValueError:
        return part  # the guard answers 422 naming it
    # always written again, in full: a date without offset is UTC (the routes' parser
    # refuses to compare it with stored times), a compact ISO date (20240101), which the
    # routes' parser would read as seconds since 1970, is the date it writes, and any
    # RFC 3339 form the routes' parser refuses (a lower-case z, a leap second) as read
    return name + b"=" + quote(bounded_date(when).isoformat()).encode()


def query_items(query: bytes) -> list[tuple[str, str]]:
    """The (name, value) pairs of a raw query string in the order sent, percent-decoded
    as UTF-8 (``+`` a space, blank values kept); a byte that is not part of UTF-8 text
    is kept as a lone surrogate (``%ff`` is ``\\udcff``), which no UTF-8 text holds, so
    :func:`not_utf8` finds it."""
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True, encoding="latin-1")
    return [(_utf8(name), _utf8(value)) for name, value in pairs]


def _utf8(text: str) -> str:
    return text.encode("latin-1").decode("utf-8", "surrogateescape")


def not_utf8(text: str) -> bool:
    """Whether a name or value of :func:`query_items` was sent as bytes that are not
    UTF-8 text (each such byte read as a lone surrogate)."""
    return any("\udc80" <= ch <= "\udcff" for ch in text)


#: a byte outside ASCII
_NOT_ASCII = re.compile(rb"[\x80-\xff]")


def percent_encoded(query: bytes) -> bytes:
    """``query`` with each byte outside ASCII percent-encoded, as a client should have
    sent it: the routes' parser reads such bytes as Latin-1, so ``café`` sent unencoded
    as UTF-8 would filter on ``cafÃ©``; encoded, it is read as the text it is (and bytes
    that are not UTF-8 are refused by :func:`check_params`)."""
    if query.isascii():
        return query
    return _NOT_ASCII.sub(lambda byte: b"%%%02X" % byte[0][0], query)


def bound_query_dates(query: bytes) -> bytes:
    """``query`` with each date bound of a filter written in full as UTC, within the
    stored years (other parameters byte for byte as sent)."""
    if b"created_" not in query:
        return query
    return b"&".join(_bounded_part(part) for part in query.split(b"&"))


#: request headers whose values are stored (or compared with stored values)
_STORED_HEADERS = ("Idempotency-Key", "If-Match")


def _check_content_coding(request: Request[Any, Any, Any]) -> None:
    """415 naming ``Content-Encoding`` for a body sent in a content coding (gzip, br, ...):
    bodies are read as sent, never decoded, and a coded body must not be taken for its
    content (RFC 9110 15.5.16); ``Accept-Encoding: identity`` says what is taken."""
    if request.method not in _BODY_METHODS:
        return
    codings = (
        c.strip()
        for line in request.headers.getall("content-encoding", [])
        for c in line.split(",")
    )
    coded = [c for c in codings if c and c.lower() != "identity"]
    if coded:
        shown = printable(", ".join(coded))
        raise ApiProblem(
            415,
            "Unsupported content coding",
            f"Content-Encoding: the body must be sent as is (identity), not {shown}",
            field="Content-Encoding",
            headers={"Accept-Encoding": "identity"},
        )


#: what an ``Idempotency-Key`` is made of: visible ASCII and spaces (a Structured Field
#: string's characters, as the header's specification has it)
_KEY_TEXT = re.compile(r"[\x20-\x7e]*")


def _check_idempotency_key(request: Request[Any, Any, Any]) -> None:
    """400 naming ``Idempotency-Key`` for a key sent twice (which one the client meant is
    unknown) or holding a character outside visible ASCII: header bytes beyond ASCII are
    read as Latin-1, so such a key would be stored as other text than the one sent."""
    keys = request.headers.getall("idempotency-key", [])
    if len(keys) > 1:
        raise _refuse("Idempotency-Key", "sent more than once: send one key", status=400)
    if keys and not _KEY_TEXT.fullmatch(keys[0]):
        raise _refuse(
            "Idempotency-Key", "must be visible ASCII characters (and spaces)", status=400
        )


def check_params(request: Request[Any, Any, Any]) -> None:
    """422 naming the query or path parameter, or the stored header, that cannot be
    stored (or a bad date); 400 naming a query parameter not sent as UTF-8 text, or an
    ``Idempotency-Key`` sent twice or outside visible ASCII; 415
    naming ``Content-Encoding`` for a body in a content coding. Every route's guard runs
    it, a file upload's and a page's included."""
    _check_content_coding(request)
    for header in _STORED_HEADERS:
        problem = unstorable(request.headers.get(header, ""))
        if problem:
            raise _refuse(header, problem)
    _check_idempotency_key(request)
    for name, value in query_items(request.scope.get("query_string", b"")):
        if not_utf8(name) or not_utf8(value):
            raise _refuse(name, "not valid UTF-8 text", status=400)
        problem = unstorable(name) or unstorable(value)
        if problem:
            raise _refuse(name, problem)
        if _DATE_PARAM.search(name):
            _check_date(name, value)
    for name, value in request.path_params.items():
        problem = unstorable(str(value))
        if problem:
            raise _refuse(name, problem)
        if isinstance(value, int) and not -MAX_INT32 - 1 <= value <= MAX_INT32:
            raise _refuse(name, "is a number out of range (no id is that large)")


def _check_body(body: bytes, *, item_key: str | None = None) -> None:
    try:
        text, utf8 = body.decode("utf-8"), True
    except UnicodeDecodeError:  # each bad byte read as a lone surrogate, to be found below
        text, utf8 = body.decode("utf-8", "surrogateescape"), False
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:
        key = too_deep(text)
        if key is not None:
            message = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
            raise _refuse(key or "body", message, status=400)
    lowered = body.lower()
    hinted = b"\\u0000" in lowered or b"\\ud" in lowered or _NUMBER_HINT.search(body)
    if item_key is not None and utf8 and not hinted:
        return
    try:
        if item_key is not None:
            document = json.loads(text, parse_int=TooManyDigits.parse)
        else:
            document = load_json(text, parse_int=TooManyDigits.parse)
    except RepeatedKey as exc:
        field = field_path((*exc.path, exc.args[0]))
        raise _refuse(field, f"the key {exc.args[0]!r} is given twice") from None
    except (ValueError, RecursionError):
        return  # malformed: the route's own parsing answers 400
    if utf8 and not hinted:
        return
    found = unstorable_value(document)
    if found:
        field, problem = found
        if item_key is not None:
            field = _item_field(field, document, item_key)
        if not utf8 and "surrogate" in problem:
            raise _refuse(field or "body", "not valid UTF-8 text", status=400)
        raise _refuse(field or "body", problem)


async def refuse_unstorable_input(request: Request[Any, Any, Any]) -> None:
    """``before_request`` hook: 422 on unstorable input, 400 for a document too deep, 415
    for a body that is not JSON (every body of this API is) or is in a content coding."""
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
    _check_body(body, item_key=_ITEM_BODIES.get(request.url.path))
