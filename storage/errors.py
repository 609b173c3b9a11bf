"""Errors raised by the storage layer.

::

    StorageError
     +-- NotFound               an id that does not exist
     +-- Conflict               a write that collides with what is stored
     |    +-- IdempotencyConflict   same idempotency key, different request
     +-- InvalidCursor          a pagination cursor that this store did not issue

The API maps these to HTTP statuses in one table; database driver errors never leave
the storage package as such where a caller could act on them.
"""

from __future__ import annotations

__all__ = ["Conflict", "IdempotencyConflict", "InvalidCursor", "NotFound", "StorageError"]


class StorageError(Exception):
    """Base of every error raised on purpose by ``storage``."""


class NotFound(StorageError):
    """The requested entity does not exist."""


class Conflict(StorageError):
    """The write collides with an existing entity (duplicate id, ...)."""


class IdempotencyConflict(Conflict):
    """An idempotency key was reused with a different request body."""


class InvalidCursor(StorageError, ValueError):
    """A pagination cursor that cannot be decoded."""
