"""Column types that SQLModel's defaults get wrong for this project."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import types
from sqlalchemy.engine.interfaces import Dialect

__all__ = ["UTCDateTime"]


class UTCDateTime(types.TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that only accepts aware values and returns them in UTC.

    SQLite keeps no offset, so values are converted to UTC before they are bound; that
    also keeps SQLite's text timestamps ordered correctly.
    """

    impl = types.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Convert to UTC; refuse naive datetimes."""
        if value is None:
            return None
        if value.utcoffset() is None:
            raise ValueError("naive datetime; storage only handles timezone-aware values")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach UTC to SQLite's naive values; normalize others to UTC."""
        if value is None:
            return None
        if value.utcoffset() is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)
