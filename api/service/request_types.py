"""Types of request fields that pydantic alone does not give: dates as text kept within
the years rows are stored in, and "exactly one of these fields" as JSON Schema."""

from __future__ import annotations

from datetime import UTC, datetime
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
]


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


def _date_as_text(value: Any) -> Any:
    if isinstance(value, str | datetime):
        return value
    raise ValueError("a date-time is written as ISO 8601 text, e.g. 2026-12-01T00:00:00Z")


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
