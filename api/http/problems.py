"""Errors as ``application/problem+json`` (RFC 9457), mapped in one table.

Problem bodies name the field at fault and never echo prompts, ground truths or keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    NotFoundException,
    PermissionDeniedException,
    SerializationException,
    ValidationException,
)
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from api.service.attempts import TooManyAttempts
from api.service.errors import NotPermitted, ServiceError, body_path
from judge.errors import InputError, JudgeSpecError, RubricError
from storage.errors import (
    Conflict,
    IdempotencyConflict,
    InvalidCursor,
    InvalidReview,
    NotFound,
    PreconditionFailed,
    database_fault,
)
from storage.search import InvalidSearch

__all__ = ["PROBLEM_MEDIA_TYPE", "ApiProblem", "exception_handlers", "problem_response"]

PROBLEM_MEDIA_TYPE = "application/problem+json"
#: the ``Retry-After`` of a 503 for a database that did not answer (a restart, a lock)
DATABASE_RETRY_SECONDS = 5


class ApiProblem(Exception):
    """A problem raised by a handler: status, title, detail and optionally the field."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        *,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.headers = headers or {}


@dataclass(frozen=True, slots=True)
class _Mapping:
    status: int
    title: str


#: exception class -> status and title; the first matching class in order wins
_TABLE: tuple[tuple[type[Exception], _Mapping], ...] = (
    (IdempotencyConflict, _Mapping(409, "Idempotency key reused with a different request")),
    (PreconditionFailed, _Mapping(412, "Precondition failed")),
    (InvalidReview, _Mapping(422, "Invalid request")),
    (Conflict, _Mapping(409, "Conflict")),
    (NotFound, _Mapping(404, "Not found")),
    (InvalidCursor, _Mapping(400, "Invalid cursor")),
    (InvalidSearch, _Mapping(422, "Invalid search")),
    (NotPermitted, _Mapping(403, "Forbidden")),
    (TooManyAttempts, _Mapping(429, "Too many attempts")),
    (ServiceError, _Mapping(422, "Invalid request")),
    (InputError, _Mapping(422, "Invalid input")),
    (JudgeSpecError, _Mapping(422, "Invalid judge")),
    (RubricError, _Mapping(422, "Invalid rubric")),
    (NotAuthorizedException, _Mapping(401, "Not authenticated")),
    (PermissionDeniedException, _Mapping(403, "Forbidden")),
    (NotFoundException, _Mapping(404, "Not found")),
)


def problem_response(
    status: int,
    title: str,
    detail: str,
    *,
    instance: str | None = None,
    errors: list[dict[str, str]] | None = None,
    headers: dict[str, str] | None = None,
) -> Response[dict[str, Any]]:
    """A problem+json response."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if instance:
        body["instance"] = instance
    if errors:
        body["errors"] = errors
    # a problem is read as JSON only, never sniffed into something a browser would run
    all_headers = {"X-Content-Type-Options": "nosniff", **(headers or {})}
    if status == 401:
        all_headers.setdefault("WWW-Authenticate", "Bearer")
    return Response(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=all_headers)


#: request headers by the handler parameters that take them: a problem names the header
_HEADERS = {"idempotency_key": "Idempotency-Key", "if_match_line": "If-Match"}


def _sent_names(request: Request[Any, Any, Any]) -> dict[str, str]:
    """The handler's parameters by their Python name -> the name a client sends (a
    query parameter declared ``QueryParameter(name="set")`` is ``set``, not the
    handler's ``scenario_set``)."""
    try:
        parameters = request.route_handler.parsed_fn_signature.parameters
    except (AttributeError, KeyError):  # routing refused the request: no handler
        return {}
    names = {}
    for name, parameter in parameters.items():
        kwarg = parameter.kwarg_definition
        sent = getattr(kwarg, "query", None) or getattr(kwarg, "name", None)
        if isinstance(sent, str) and sent != name:
            names[name] = sent
    return names


def _validation_errors(
    exc: ValidationException, request: Request[Any, Any, Any]
) -> list[dict[str, str]]:
    errors = []
    sent = _sent_names(request)
    for item in exc.extra if isinstance(exc.extra, list) else []:
        if isinstance(item, dict):
            field = str(item.get("key") or item.get("source") or "body")
            message = str(item.get("message", "invalid"))
            if item.get("source") == "header":
                field = _HEADERS.get(field, field)
            elif field == "data" and message == "'data'":  # no body where one is needed
                field, message = "body", "a request body is required"
            else:
                field = sent.get(field, body_path(field))
            errors.append({"field": field, "message": message})
    return errors or [{"field": "body", "message": str(exc.detail)}]


def _handle(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    path = request.url.path
    if isinstance(exc, ApiProblem):
        errors = [{"field": exc.field, "message": exc.detail}] if exc.field else None
        return problem_response(
            exc.status, exc.title, exc.detail, instance=path, errors=errors, headers=exc.headers
        )
    if isinstance(exc, HTTPException) and isinstance(exc.__cause__, SerializationException):
        # Litestar's parser refused the body as a whole (a ClientException raised from
        # its SerializationException): a document, not a value, is at fault
        detail = f"body: not a JSON document ({exc.detail})"
        errors = [{"field": "body", "message": detail}]
        return problem_response(400, "Malformed JSON", detail, instance=path, errors=errors)
    if isinstance(exc, ValidationException):  # a parameter or a body's value: always 422
        errors = _validation_errors(exc, request)
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        return problem_response(422, "Invalid request", detail, instance=path, errors=errors)
    for kind, mapping in _TABLE:
        if isinstance(exc, kind):
            field = getattr(exc, "field", None)
            errors = [{"field": field, "message": str(exc)}] if field else None
            detail = str(exc.detail) if isinstance(exc, HTTPException) else str(exc)
            title = exc.title if isinstance(exc, ServiceError) else mapping.title
            wait = getattr(exc, "retry_after", None)
            headers = {"Retry-After": str(wait)} if wait is not None else None
            return problem_response(
                mapping.status, title, detail, instance=path, errors=errors, headers=headers
            )
    if isinstance(exc, HTTPException):
        # the framework's own body limit (413) is the body's fault, as the upload's is
        body = [{"field": "body", "message": str(exc.detail)}] if exc.status_code == 413 else None
        return problem_response(
            exc.status_code,
            exc.detail or "Error",
            str(exc.detail),
            instance=path,
            errors=body,
            headers=dict(exc.headers or {}),
        )
    if database_fault(exc):  # it passes: a client may try again (a submission with its key)
        request.logger.error("the database failed on %s", path, exc_info=exc)
        return problem_response(
            503,
            "Database unavailable",
            "the database did not answer; try again shortly",
            instance=path,
            headers={"Retry-After": str(DATABASE_RETRY_SECONDS)},
        )
    request.logger.exception("unhandled error on %s", path)
    return problem_response(
        HTTP_500_INTERNAL_SERVER_ERROR,
        "Internal error",
        "the server failed; see its log",
        instance=path,
    )


#: handlers for ``Litestar(exception_handlers=...)``
exception_handlers: dict[type[Exception] | int, Any] = {Exception: _handle}
