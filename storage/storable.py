"""What both databases can store: one definition for every way in.

The HTTP API's input guard and the importers refuse the same values with the same
words: text with a NUL character (PostgreSQL stores none, in text or in JSON) or a lone
surrogate (not a character, no encoding writes it), numbers that are not finite (JSON
has no ``inf``), integers beyond PostgreSQL's ``INTEGER`` where a column holds one,
documents nested deeper than :data:`MAX_JSON_DEPTH`, and dates outside the years rows
are stored in (from :data:`EARLIEST` up to, not including, :data:`LATEST`, also once
moved to UTC).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "EARLIEST",
    "LATEST",
    "MAX_INT32",
    "MAX_JSON_DEPTH",
    "TooManyDigits",
    "field_path",
    "printable",
    "stored_date",
    "too_deep",
    "unstorable",
    "unstorable_value",
]

#: deeper JSON documents are refused
MAX_JSON_DEPTH = 32
#: the largest integer both databases store in an integer column (PostgreSQL's INTEGER)
MAX_INT32 = 2**31 - 1
#: dates a request or an import may name: both databases store them, also once moved to UTC
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)

# a JSON string (or a Python literal's, either quote), an object key, or a bracket
_TOKEN = re.compile(r""""(?:[^"\\]|\\.)*"(\s*:)?|'(?:[^'\\]|\\.)*'(\s*:)?|[\[\]{}()]""", re.DOTALL)
#: the longest field name shown back
_SHOWN_PATH = 200


def unstorable(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None."""
    if "\x00" in text:
        return "contains a NUL character"
    if any("\ud800" <= ch <= "\udfff" for ch in text):
        return "contains a lone surrogate, not a character"
    return None


def printable(name: str) -> str:
    """``name`` as it can be shown back (in a problem's field, a log line, any JSON): a
    lone surrogate written as its escape, the rest as given."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")[:_SHOWN_PATH]


def too_deep(text: str, *, limit: int = MAX_JSON_DEPTH) -> str | None:
    """None when the JSON document (or Python literal) ``text`` nests at most ``limit``
    arrays and objects deep; else the top-level key under which it goes deeper (``""``
    when that is not under a key). Strings are left out; quick when there are few
    brackets."""
    if sum(text.count(b) for b in "[{(") <= limit:
        return None
    depth, key = 0, ""
    for token in _TOKEN.finditer(text):
        char = token.group()[0]
        if char in "\"'":
            if depth == 1 and (token.group(1) or token.group(2)):
                key = token.group()[1 : token.group().rindex(char)]
        elif char in "[{(":
            depth += 1
            if depth > limit:
                return key
        else:
            depth -= 1
    return None


class TooManyDigits(int):
    """An integer too long to convert (more digits than Python reads), kept as a marker so
    the field it was in can be named: pass ``parse_int=TooManyDigits.parse`` to
    ``json.loads``."""

    digits: int

    @classmethod
    def parse(cls, text: str) -> int:
        """``int(text)``, or a :class:`TooManyDigits` marker when it has too many digits."""
        try:
            return int(text)
        except ValueError:
            marker = cls(0)
            marker.digits = len(text.lstrip("-"))
            return marker


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def field_path(parts: tuple[str | int, ...]) -> str:
    """The field a problem names for the keys and list positions ``parts`` that lead to a
    value: ``metadata.tags[2]``, as :func:`unstorable_value` names them."""
    path = ""
    for part in parts:
        path = _join(path, part)
    return path


def unstorable_value(value: Any, path: str = "", *, depth: int = 0) -> tuple[str, str] | None:
    """``(field, why)`` for the first part of a decoded JSON value no database stores (a
    text as :func:`unstorable` says, keys included; a number that is not finite or too
    long; nesting deeper than :data:`MAX_JSON_DEPTH`), or None."""
    if isinstance(value, str):
        problem = unstorable(value)
        return (path, problem) if problem else None
    if isinstance(value, TooManyDigits):
        return path, f"an integer of {value.digits} digits, too long to store"
    if isinstance(value, float) and not math.isfinite(value):
        return path, f"{value} is not a finite number"
    if not isinstance(value, Mapping | list | tuple):
        return None
    if depth >= MAX_JSON_DEPTH:
        return path, f"nested deeper than {MAX_JSON_DEPTH} levels"
    items = value.items() if isinstance(value, Mapping) else enumerate(value)
    for key, item in items:
        where = _join(path, key if isinstance(key, int) else str(key))
        if isinstance(key, str) and (problem := unstorable(key)):
            return where, f"the key {problem}"
        found = unstorable_value(item, where, depth=depth + 1)
        if found:
            return found
    return None


def stored_date(value: datetime) -> datetime:
    """``value`` in UTC (naive read as UTC); ``ValueError`` when, once moved to UTC, it
    lies before :data:`EARLIEST` or at or after :data:`LATEST`."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        moved = aware.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 with an offset that leaves the calendar
        moved = None
    if moved is None or not EARLIEST <= moved < LATEST:
        raise ValueError(
            f"must lie from {EARLIEST.date()} up to, not including, {LATEST.date()} (UTC)"
        )
    return moved
