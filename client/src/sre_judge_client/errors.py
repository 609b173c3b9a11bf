"""Problem+json answers as exceptions that carry the field at fault."""

from __future__ import annotations

from typing import Any

__all__ = [
    "ApiError",
    "Conflict",
    "Forbidden",
    "GroundTruthConflict",
    "InvalidRequest",
    "NotFound",
    "PreconditionFailed",
    "Unauthorized",
    "Unavailable",
    "error_from_response",
]


class ApiError(Exception):
    """An error answer of the server (RFC 9457 problem details).

    ``field`` is the first field the server named as at fault (``None`` when it named
    none); ``errors`` all of them as ``{"field", "message"}``.
    """

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        errors: list[dict[str, str]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = errors or []
        self.field = self.errors[0].get("field") if self.errors else None
        self.retry_after = retry_after
        where = f" [{self.field}]" if self.field else ""
        super().__init__(f"{status} {title}{where}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its constructor's arguments, so the error crosses a process
        boundary (a harness's worker pool) as itself, its fields kept."""
        keywords = {"errors": self.errors, "retry_after": self.retry_after}
        return _rebuild, (type(self), (self.status, self.title, self.detail), keywords)


class InvalidRequest(ApiError):
    """400 or 422: the request was refused; ``field`` says which part."""


class Unauthorized(ApiError):
    """401: no token, or one the server does not know."""


class Forbidden(ApiError):
    """403: the token's role may not do this."""


class NotFound(ApiError):
    """404: no such id (or not yours to see)."""


class Conflict(ApiError):
    """409: a conflicting write, e.g. an idempotency key reused for another request."""


class GroundTruthConflict(Conflict):
    """A scenario id whose stored ground truth is not the one this caller holds.

    Raised by ``register_scenario(..., exist_ok=True)`` when the id exists with another
    ground truth, and by the SREGym oracle when it may not make the caller's ground truth
    a new version, or when a grading was judged against another one. ``stored_sha256``
    (with ``version``, when known) is the server's, ``sent_sha256`` the caller's: SHA-256
    of the UTF-8 text, as the server's ``ground_truth_sha256``.
    """

    def __init__(
        self,
        scenario_id: str,
        *,
        stored_sha256: str | None,
        sent_sha256: str,
        version: int | None = None,
        detail: str = "",
    ) -> None:
        self.scenario_id = scenario_id
        self.stored_sha256 = stored_sha256
        self.sent_sha256 = sent_sha256
        self.version = version
        at = f" (version {version})" if version is not None else ""
        stored = stored_sha256 or "unknown"
        detail = detail or (
            f"scenario {scenario_id!r} is registered with another ground truth{at}: "
            f"stored sha256 {stored}, sent sha256 {sent_sha256}"
        )
        errors = [{"field": "ground_truth", "message": detail}]
        super().__init__(409, "Ground truth conflict", detail, errors=errors)

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its constructor's arguments (see :meth:`ApiError.__reduce__`)."""
        keywords = {
            "stored_sha256": self.stored_sha256,
            "sent_sha256": self.sent_sha256,
            "version": self.version,
            "detail": self.detail,
        }
        return _rebuild, (type(self), (self.scenario_id,), keywords)


class PreconditionFailed(ApiError):
    """412: the grading changed since the revision given in ``If-Match``."""


class Unavailable(ApiError):
    """429, 502, 503 or 504 (429 and 503 after the retries, and 502 and 504 of a GET):
    the server is busy, away behind its gateway, or its judge is."""


def _rebuild(kind: type[ApiError], args: tuple[Any, ...], keywords: dict[str, Any]) -> ApiError:
    """An error made again from its constructor's arguments (unpickling)."""
    return kind(*args, **keywords)


_BY_STATUS: dict[int, type[ApiError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: PreconditionFailed,
    422: InvalidRequest,
    429: Unavailable,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def retry_after_seconds(value: str | None) -> float | None:
    """``Retry-After`` in seconds (the delta form; an HTTP date counts as absent)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def error_from_response(status: int, body: Any, headers: Any) -> ApiError:
    """The exception for an error answer (any body: problem+json, JSON or none)."""
    problem = body if isinstance(body, dict) else {}
    errors = problem.get("errors")
    kind = _BY_STATUS.get(status, ApiError)
    return kind(
        status,
        str(problem.get("title") or f"HTTP {status}"),
        str(problem.get("detail") or ""),
        errors=[e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else None,
        retry_after=retry_after_seconds(headers.get("Retry-After")),
    )
