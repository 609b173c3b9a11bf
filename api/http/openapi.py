"""The OpenAPI document says what the API does: bearer auth, every operation described,
every error answer listed with its problem+json shape.

Litestar builds the document from the route handlers; :func:`document_api` completes it
once the app is built, from what each handler declares:

- a handler guarded by :func:`api.http.auth.require` needs a bearer token: it carries
  the ``bearer`` security requirement (the "Authorize" button of ``/schema``) and
  answers 401 (no or a bad token) and 403 (a role too low);
- a path with parameters answers 404 for an unknown id; parameters or a body answer 422
  naming the field, and a body answers 400 when it is not JSON, 413 when too large and
  415 in another media type;
- an ``If-Match`` header answers 412 (stale) and 428 (missing where required);
- :data:`EXTRA_ERRORS` lists what only the handler knows: 409, 429, 503, ...;
- :data:`SAME_BODY_ERRORS` lists the error answers that carry the success answer's body
  instead of a problem (a not-ready ``/readyz``);
- :data:`OTHER_CONTENT` lists the answers that are not JSON (Prometheus text, CSV,
  archives).

Every method is completed, ``HEAD`` included. The document and its page are served by
:func:`document_router`, whose paths that serve nothing answer a 404 problem, whatever
the method, as every other unknown path does.

The description of an operation is its handler's docstring unless it sets one.
"""

from __future__ import annotations

import inspect
from typing import Any

from litestar import HttpMethod, Litestar, Response, Router, route
from litestar.exceptions import NotFoundException
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import (
    Components,
    OpenAPIFormat,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIResponse,
    OpenAPIType,
    Reference,
    Schema,
    SecurityScheme,
)
from litestar.routes import HTTPRoute

from api.http.openapi_schemas import document_request_bodies, forbid_nul, operations
from api.http.problems import PROBLEM_MEDIA_TYPE
from api.reports.exports import MEDIA_TYPES
from api.reports.sregym_writer import ARCHIVE_MEDIA_TYPES

__all__ = [
    "ERROR_TEXT",
    "EXTRA_ERRORS",
    "OTHER_CONTENT",
    "OTHER_SUCCESS",
    "RESPONSE_HEADERS",
    "SAME_BODY_ERRORS",
    "document_api",
    "document_on_first_read",
    "document_router",
    "required_errors",
]

ERROR_TEXT: dict[int, str] = {
    400: "Malformed request: the body is not JSON (or nested too deep), a bad cursor, or a "
    "query parameter the route does not take, given more than once or not UTF-8 text "
    "(`errors` names each)",
    401: "No bearer token, or one that is unknown, revoked or expired",
    403: "The token's role (or a deployment setting) does not allow this",
    404: "No such id",
    409: "Conflicts with what is stored (a duplicate, a reused idempotency key, a state "
    "that does not allow it)",
    412: "If-Match does not match the current ETag: someone changed it first",
    413: "The body is larger than the server accepts",
    415: "The body's Content-Type is not one this route takes",
    422: "Invalid input; `errors` names each field at fault",
    428: "If-Match is required: send the ETag you read",
    429: "Too many requests from this token; retry after `Retry-After` seconds",
    500: "The export failed while reading; nothing partial is sent",
    503: "The queue is full, or the judge or the database is away; see `Retry-After`",
    504: "The judge timed out while the request waited",
}

#: errors only the handler knows it may answer, by operation id
EXTRA_ERRORS: dict[str, tuple[int, ...]] = {
    "createSubmission": (403, 409, 429, 503),
    "listGradings": (400,),
    "createScenario": (409,),
    "exportGradings": (500,),
    "createOverride": (409,),
    "updateScenario": (409,),
    "reviewQueue": (400,),
    "claimReview": (409,),
    "finishReview": (409,),
    "skipReview": (409,),
    "assignReview": (409,),
    "labelGrading": (409,),
    "defineFailureTag": (409,),
    "tagGrading": (409,),
    "untagGrading": (409,),
    "revokeToken": (409,),
    "createRegradeJob": (409,),
    "pauseRegradeJob": (409,),
    "resumeRegradeJob": (409,),
    "cancelRegradeJob": (409,),
    "getRegradeBatchRequests": (409,),
    "postRegradeBatchResults": (409,),
    "redeliverWebhook": (409,),
}

#: error statuses answered with the success answer's body (and no Retry-After), not a
#: problem, with what each says, by operation id: uptime checkers read why not ready
SAME_BODY_ERRORS: dict[str, dict[int, str]] = {
    "readyz": {503: "Not ready: the same body as when ready, `reason` saying why"},
    "readyz_head": {503: "Not ready (`GET /readyz` says why)"},
}

#: further success statuses with the same body as the declared one, by operation id
OTHER_SUCCESS: dict[str, tuple[int, ...]] = {
    "createSubmission": (201,),  # graded within ?wait=SECONDS
    "createRegradeJob": (200,),  # a dry run: nothing created
}

#: success answers in other media types than JSON, by operation id
OTHER_CONTENT: dict[str, tuple[str, ...]] = {
    "metrics": ("text/plain",),
    "exportGradings": tuple(sorted({*MEDIA_TYPES.values(), *ARCHIVE_MEDIA_TYPES.values()})),
    "getRegradeFlips": ("application/json", "text/csv"),
}

#: the media types of OTHER_CONTENT that are bytes, not text
_BINARY = frozenset(ARCHIVE_MEDIA_TYPES.values())

#: headers clients follow, on the success answers that send them, by operation id
RESPONSE_HEADERS: dict[str, tuple[str, ...]] = {
    "createSubmission": ("Location", "ETag", "Idempotent-Replayed"),
    "createImport": ("Location",),
    "createRegradeJob": ("Location",),
    "getGrading": ("ETag",),
    "createOverride": ("Location", "ETag"),
    "tagGrading": ("Location",),
    "createScenario": ("Location", "ETag"),
    "getScenario": ("ETag",),
    "updateScenario": ("ETag",),
}
_HEADER_TEXT = {
    "Location": "the URL of what the request made (to read it, or to poll it while pending)",
    "ETag": "the resource's revision, strong and quoted: send it back as If-Match",
    "Idempotent-Replayed": "true when the answer replays an earlier one of the same key",
}
_RETRY_AFTER = "seconds to wait before sending the request again"

_PROBLEM = Schema(
    type=OpenAPIType.OBJECT,
    required=["type", "title", "status", "detail"],
    properties={
        "type": Schema(type=OpenAPIType.STRING, description="always about:blank"),
        "title": Schema(type=OpenAPIType.STRING),
        "status": Schema(type=OpenAPIType.INTEGER),
        "detail": Schema(type=OpenAPIType.STRING),
        "instance": Schema(type=OpenAPIType.STRING, description="the request path"),
        "errors": Schema(
            type=OpenAPIType.ARRAY,
            items=Schema(
                type=OpenAPIType.OBJECT,
                required=["field", "message"],
                properties={
                    "field": Schema(type=OpenAPIType.STRING),
                    "message": Schema(type=OpenAPIType.STRING),
                },
            ),
        ),
    },
    description="RFC 9457 problem details",
)
BEARER = SecurityScheme(
    type="http",
    scheme="bearer",
    description="An API token from `sre-judge tokens create` or `POST /v1/tokens`",
)


def _guarded(handler: HTTPRouteHandler) -> bool:
    return any(getattr(g, "required_role", None) for g in handler.resolve_guards())


def required_errors(
    handler: HTTPRouteHandler, operation: Any, path: str, method: str = "get"
) -> set[int]:
    """The error statuses ``operation`` of ``handler`` at ``path`` can answer."""
    errors = set(EXTRA_ERRORS.get(handler.operation_id or "", ()))  # type: ignore[arg-type]
    if _guarded(handler):
        errors |= {401, 403}
    if "{" in path:
        errors.add(404)
    if operation.parameters or operation.request_body:
        errors.add(422)
    if operation.request_body or path.startswith("/v1/"):
        errors.add(400)  # a body not JSON; a query parameter the route does not take
    if operation.request_body or method in ("post", "put", "patch"):
        # the app's size limit and body guard answer every write, with a body or not
        errors |= {413, 415}
    if any(getattr(p, "name", "") == "If-Match" for p in operation.parameters or []):
        errors |= {412, 428}  # a stale ETag; none sent where one is required
    if "400" in (operation.responses or {}):  # Litestar's own, for parameters
        errors.add(400)
    return errors


def _problem(status: int) -> OpenAPIResponse:
    media = OpenAPIMediaType(schema=Reference(ref="#/components/schemas/Problem"))
    response = OpenAPIResponse(description=ERROR_TEXT[status], content={PROBLEM_MEDIA_TYPE: media})
    if status in (429, 503):  # a limit, a full queue, a judge or database away: when to retry
        seconds = Schema(type=OpenAPIType.INTEGER, minimum=0)
        response.headers = {"Retry-After": OpenAPIHeader(schema=seconds, description=_RETRY_AFTER)}
    return response


def _handlers(app: Litestar) -> dict[str, HTTPRouteHandler]:
    return {
        str(handler.operation_id): handler
        for route in app.routes
        if isinstance(route, HTTPRoute)
        for handler in route.route_handlers
        if handler.operation_id
    }


def _other_content(operation: Any, media_types: tuple[str, ...]) -> None:
    text = OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING))
    binary = OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY))
    for status, response in operation.responses.items():
        if status.startswith("2") and isinstance(response, OpenAPIResponse):
            schema = next(iter((response.content or {}).values()), None)
            content = {media: binary if media in _BINARY else text for media in media_types}
            if "application/json" in content and schema:
                content["application/json"] = schema
            response.content = content


def _same_body(operation: Any, errors: dict[int, str]) -> None:
    """Declare ``errors`` (status: description) with the success answer's content."""
    if not errors:
        return
    declared = next(r for s, r in operation.responses.items() if s.startswith("2"))
    for status, description in errors.items():
        operation.responses[str(status)] = OpenAPIResponse(
            description=description, content=declared.content
        )


async def _not_found_as_problem(response: Response[Any]) -> Response[Any]:
    """A 404 under the document's path as a problem, not Litestar's own HTML page."""
    if response.status_code == 404:
        raise NotFoundException
    return response


def _nothing_here() -> None:
    """Any method but ``GET`` of a path under the document's path that serves nothing."""
    raise NotFoundException


def document_router(path: str) -> Router:
    """The router that serves the OpenAPI document and its page at ``path`` (for
    ``OpenAPIConfig(openapi_router=...)``): a path under it that serves nothing (a
    documentation page this service does not have, a typo) answers a 404 problem,
    whatever the method.

    Litestar adds the ``GET`` of such a path (its own 404 page, made a problem by
    :func:`_not_found_as_problem`); the router holds the other methods, which would
    otherwise answer 405 and advertise a ``GET`` that finds nothing.
    """
    others = [method for method in HttpMethod if method is not HttpMethod.GET]
    unknown_path = route(
        "/{path:str}", http_method=others, include_in_schema=False, sync_to_thread=False
    )(_nothing_here)
    return Router(
        path,
        route_handlers=[unknown_path],
        include_in_schema=False,
        after_request=_not_found_as_problem,
    )


def document_on_first_read(app: Litestar) -> None:
    """Complete ``app``'s OpenAPI document before it is first served.

    Building the document takes about half of building the app, and most apps (every
    test's, a worker process's) never serve it: it is built, and completed by
    :func:`document_api`, on the first request under the document's path.
    """
    if app.state.get("openapi_documented"):
        return
    app.state.openapi_documented = True
    document_api(app)


def document_api(app: Litestar) -> None:
    """Complete ``app``'s OpenAPI document: security, descriptions and error answers."""
    document = app.openapi_schema
    components = document.components
    if not isinstance(components, Components):  # pragma: no cover - Litestar makes one
        return
    components.schemas = {**(components.schemas or {}), "Problem": _PROBLEM}
    components.security_schemes = {**(components.security_schemes or {}), "bearer": BEARER}
    handlers = _handlers(app)
    document_request_bodies(app, handlers)
    for path, method, operation, handler in operations(app, handlers):
        operation_id = str(handler.operation_id)
        if not operation.description and handler.fn.__doc__:
            operation.description = inspect.cleandoc(handler.fn.__doc__)
        if _guarded(handler):
            operation.security = [{"bearer": []}]
        for parameter in operation.parameters or ():
            forbid_nul(getattr(parameter, "schema", None))
            if getattr(parameter, "name", "") == "If-Match":
                parameter.required = True  # the handler answers 428 without it
        for status in sorted(required_errors(handler, operation, path, method)):
            operation.responses[str(status)] = _problem(status)
        _same_body(operation, SAME_BODY_ERRORS.get(operation_id, {}))
        _success(operation, OTHER_SUCCESS.get(operation_id, ()))
        _headers(operation, RESPONSE_HEADERS.get(operation_id, ()))
        if operation_id in OTHER_CONTENT:
            _other_content(operation, OTHER_CONTENT[operation_id])


def _headers(operation: Any, names: tuple[str, ...]) -> None:
    """Declare ``names`` on each success answer of ``operation`` (not every success
    sends each: a dry run has no ``Location``)."""
    if not names:
        return
    text = Schema(type=OpenAPIType.STRING)
    for status, response in operation.responses.items():
        if status.startswith("2") and isinstance(response, OpenAPIResponse):
            response.headers = {
                **(response.headers or {}),
                **{n: OpenAPIHeader(schema=text, description=_HEADER_TEXT[n]) for n in names},
            }


def _success(operation: Any, statuses: tuple[int, ...]) -> None:
    declared = next(r for s, r in operation.responses.items() if s.startswith("2"))
    for status in statuses:
        operation.responses.setdefault(str(status), declared)
