"""Pagination cursors, signed so that a client can hand back only what it was given.

A cursor is ``<payload>.<tag>``: URL-safe base64 (unpadded) of the position as compact
JSON, and of an HMAC-SHA256 (first 16 bytes) over the list's name and that payload,
keyed by the service key's ``"cursor"`` purpose. Every process sharing the service key
reads every other's cursors; a cursor edited, forged, from another list or signed with
another key is refused with :class:`~storage.errors.InvalidCursor` before anything in
it is parsed or reaches a query. Clients treat cursors as opaque strings.

No cursor, or an empty one (``?cursor=``, as a form or a script that always sends the
parameter writes it), asks for a list's first page, on every list: each asks
:func:`continues` before it decodes a cursor.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from typing import Any, TypeGuard

from storage.errors import InvalidCursor
from storage.keys import ServiceKey

__all__ = ["CursorCodec", "continues"]

#: bytes of the HMAC kept in a cursor: 128 bits, as many as a forger must guess
_TAG_BYTES = 16
#: a longer cursor was never issued (positions are a time and an id)
_MAX_CHARS = 512
_REFUSED = "the cursor is not one this service issued"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def continues(cursor: str | None) -> TypeGuard[str]:
    """Whether a client's ``cursor`` continues a list, to be decoded; none, or an empty
    one, asks for the first page."""
    return bool(cursor)


class CursorCodec:
    """Signs and checks the cursors of one list (``name``) under one service key."""

    def __init__(self, key: ServiceKey, name: str) -> None:
        """Cursors of the list ``name``, keyed by ``key.derive("cursor")``."""
        self._key = key.derive("cursor")
        self._name = name.encode()

    def _tag(self, payload: bytes) -> bytes:
        mac = hmac.new(self._key, self._name + b"\x00" + payload, hashlib.sha256)
        return mac.digest()[:_TAG_BYTES]

    def encode(self, position: list[Any]) -> str:
        """The signed, URL-safe cursor of ``position`` (a JSON-serialisable list)."""
        payload = json.dumps(position, separators=(",", ":"), ensure_ascii=True).encode()
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def decode(self, cursor: str) -> list[Any]:
        """The position a cursor holds; InvalidCursor unless this codec's key signed it."""
        if len(cursor) > _MAX_CHARS or not cursor.isascii() or cursor.count(".") != 1:
            raise InvalidCursor(_REFUSED)
        payload_text, tag_text = cursor.split(".")
        try:
            payload, tag = _unb64(payload_text), _unb64(tag_text)
        except (binascii.Error, ValueError) as exc:
            raise InvalidCursor(_REFUSED) from exc
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise InvalidCursor(_REFUSED)
        try:
            position = json.loads(payload)
        except ValueError as exc:  # signed by this key, yet not ours: refuse all the same
            raise InvalidCursor(_REFUSED) from exc
        if not isinstance(position, list):
            raise InvalidCursor(_REFUSED)
        return position
