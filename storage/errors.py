"""Errors raised by the storage layer.

::

    StorageError
     +-- NotFound               an id that does not exist
     +-- Conflict               a write that collides with what is stored
     |    +-- IdempotencyConflict   same idempotency key, different request
     |    +-- Superseded            a human correction of a grading a promote replaced
     +-- InvalidCursor          a pagination cursor that this service did not sign
     +-- PreconditionFailed     a conditional write whose expected revision is stale
     +-- InvalidReview          an override, label or tag that does not fit the grading

The API maps these to HTTP statuses in one table; database driver errors never leave
the storage package as such where a caller could act on them. :func:`database_fault`
tells a fault of the database's reach (it passes: try again) from any other.
"""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

__all__ = [
    "Conflict",
    "IdempotencyConflict",
    "InvalidCursor",
    "InvalidReview",
    "NotFound",
    "PreconditionFailed",
    "SchemaMismatch",
    "StorageError",
    "Superseded",
    "database_fault",
]


def database_fault(exc: BaseException) -> bool:
    """A fault of the database's reach, not of what was asked of it: a lock, a lost or
    refused connection, no connection free in the pool, a transaction the database rolled
    back (a deadlock, a serialization failure). It passes: the same work may be tried
    again."""
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, OperationalError | InterfaceError | PoolTimeout)


class StorageError(Exception):
    """Base of every error raised on purpose by ``storage``."""


class SchemaMismatch(StorageError):
    """The database's schema is not the one this code needs: migrated by a newer release
    (a revision this code does not know), or not yet migrated to this one's newest."""


class NotFound(StorageError):
    """The requested entity does not exist."""


class Conflict(StorageError):
    """The write collides with an existing entity (duplicate id, ...); ``field``, when
    given, names the request field whose value collides (an id or a tag already taken)."""

    field: str | None = None

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        if field is not None:
            self.field = field


class IdempotencyConflict(Conflict):
    """An idempotency key was reused with a different request body; ``field`` names the
    header that carried the key."""

    field = "Idempotency-Key"


class Superseded(Conflict):
    """An override or a failure tag sent to a grading a promoted regrade replaced: it
    would reach neither the verdict in force nor the reports, which read the current
    grading. ``grading_id`` names the grading refused, ``in_force`` the one to amend
    instead (the submission's current grading)."""

    def __init__(self, message: str, *, grading_id: str, in_force: str) -> None:
        super().__init__(message)
        self.grading_id = grading_id
        self.in_force = in_force


class InvalidCursor(StorageError, ValueError):
    """A pagination cursor this service did not sign (forged, edited, from another list or
    another key); ``field`` names the request parameter that carried it."""

    field = "cursor"


class PreconditionFailed(StorageError):
    """The entity changed since the revision the caller expected (a stale If-Match);
    ``field`` names the header that carried it."""

    field = "If-Match"

    def __init__(self, message: str, *, current_revision: int) -> None:
        super().__init__(message)
        self.current_revision = current_revision


class InvalidReview(StorageError, ValueError):
    """An override, label or tag that does not fit the grading; ``field`` names the culprit."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field
