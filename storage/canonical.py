"""Canonical JSON, hashes and UTC time: what the audit chain and request hashes rely on."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

__all__ = ["canonical_json", "iso_utc", "sha256_hex", "utcnow"]


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


def iso_utc(value: datetime) -> str:
    """ISO 8601 in UTC with microseconds, e.g. ``2025-01-02T03:04:05.000006+00:00``."""
    if value.utcoffset() is None:
        raise ValueError("naive datetime; storage only handles timezone-aware values")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no spaces, UTF-8 kept, datetimes as ISO 8601 UTC; no NaN."""
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=_default,
    )


def sha256_hex(text: str) -> str:
    """SHA-256 of the UTF-8 encoding of ``text``, as 64 hex digits."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
