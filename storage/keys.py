"""The service key: one secret, held outside the database, from which every keyed
purpose (audit hashes, pagination cursors) derives its own key.

The database never stores the key or anything derived from it except the keyed hashes
themselves, so someone who can write the database cannot recompute them.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass, field

__all__ = ["MIN_KEY_BYTES", "ServiceKey"]

#: a shorter key is refused: 32 bytes is the HMAC-SHA256 block strength
MIN_KEY_BYTES = 32


@dataclass(frozen=True)
class ServiceKey:
    """A secret of at least :data:`MIN_KEY_BYTES` bytes."""

    secret: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.secret) < MIN_KEY_BYTES:
            raise ValueError(f"the service key must hold at least {MIN_KEY_BYTES} bytes")

    @classmethod
    def ephemeral(cls) -> ServiceKey:
        """A random key living as long as this object: for stores nobody verifies later."""
        return cls(os.urandom(MIN_KEY_BYTES))

    def derive(self, purpose: str) -> bytes:
        """The key of one ``purpose`` (``"audit"``, ``"cursor"``): independent of the others."""
        return hmac.new(self.secret, b"sre-judge/" + purpose.encode(), hashlib.sha256).digest()

    @property
    def key_id(self) -> str:
        """A short public name of this key (safe to store and print), to tell keys apart."""
        return self.derive("key-id").hex()[:16]
