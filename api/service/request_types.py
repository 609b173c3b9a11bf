"""Types of request fields that pydantic alone does not give: dates as text kept within
the years rows are stored in, and "exactly one of these fields" as JSON Schema.

:func:`parse_datetime_text` is the one reading of a date-time written as text, for every
way in: JSON bodies (:data:`DatetimeText`, :data:`BoundedDatetime`), the filters' query
strings, the command line and the JSON-lines import.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, AwareDatetime, BeforeValidator

from storage.storable import EARLIEST, LATEST

__all__ = [
    "EARLIEST",
    "LATEST",
    "BoundedDatetime",
    "DatetimeText",
    "bounded_date",
    "exactly_one",
    "parse_datetime_text",
]

#: RFC 3339's letters, which it allows in either case
_UPPER_CASE = str.maketrans("tz", "TZ")
#: a leap second: the seconds of an RFC 3339 date-time written as 60
_LEAP_SECOND = re.compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:)60(?!\d)")


def bounded_date(value: datetime) -> datetime:
    """``value`` moved to UTC (naive read as UTC) and kept between :data:`EARLIEST` and
    :data:`LATEST`: no row was stored outside them, so a filter bound before 1900 reads as
    1900 and one after 9000 as 9000, which selects the same rows, and no bound overflows
    the databases' (or Python's) range once moved to UTC."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        moved = aware.astimezone(UTC)
    except OverflowError:  # year 1 or 9999 with an offset that leaves the calendar
        return EARLIEST if aware.year < EARLIEST.year else LATEST
    return min(max(moved, EARLIEST), LATEST)


def parse_datetime_text(text: str) -> datetime:
    """The date-time ``text`` names in ISO 8601 (``2026-01-31``, ``20260131``,
    ``2026-01-31T12:00:00Z``, an offset, fractions of a second), naive when it has no
    offset; ValueError when it names none.

    Every RFC 3339 date-time is one: ``t`` and ``z`` read in either case, and a leap
    second (``23:59:60``) as the second after ``23:59:59``, the next minute's ``:00`` (as
    PostgreSQL and Unix time read it). A string of digits is an ISO 8601 compact date
    (``20240101``) or nothing, never seconds since 1970.
    """
    text = text.translate(_UPPER_CASE)
    leap = _LEAP_SECOND.match(text)
    if leap is None:
        return datetime.fromisoformat(text)
    before = datetime.fromisoformat(f"{leap[1]}59{text[leap.end() :]}")
    try:
        return before + timedelta(seconds=1)
    except OverflowError:  # the last second of year 9999: as late as Python can say
        return before.replace(microsecond=999_999)


def _date_as_text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError("a date-time is written as ISO 8601 text, e.g. 2026-12-01T00:00:00Z")
    try:  # parsed here: pydantic would read a string of digits as seconds since 1970
        return parse_datetime_text(value)
    except ValueError:
        raise ValueError("must be an ISO 8601 date-time") from None


#: a date-time a request names, as ISO 8601 text (a number is refused, not read as epoch)
DatetimeText = Annotated[datetime, BeforeValidator(_date_as_text)]
#: the same with its offset, kept within the stored years (the bounds of a filter)
BoundedDatetime = Annotated[
    AwareDatetime, BeforeValidator(_date_as_text), AfterValidator(bounded_date)
]


def exactly_one(*choices: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """JSON Schema for "exactly one of these choices": each choice gives the properties it
    needs (required, as typed); the other ``fields`` are then absent or null."""
    branches = []
    for choice in choices:
        others = {name: {"type": "null"} for name in fields if name not in choice}
        branches.append({"required": list(choice), "properties": {**choice, **others}})
    return {"oneOf": branches}
