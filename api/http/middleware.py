"""Per-request context: a request id, one access log line, the request duration metric.

The request id is the client's ``X-Request-ID`` when it is a short token of safe
characters, else a new one; it is bound to every log line of the request and returned
in the response's ``X-Request-ID`` header. The access line names method, route
template, status and duration, never the query string, headers or body; successful
probes (``/healthz``, ``/readyz``, ``/metrics``) only at DEBUG. A request cancelled
before it was answered (the server's graceful-shutdown timeout cancels those still
open) is recorded with status 499 (nginx's "client closed request"): nothing answered
it, least of all a 500.

Litestar runs application middleware only for requests a route takes; a request refused
by routing itself (a 404 for a path no route has, a 405 for a method a path lacks) is
given the same id, line and count by a before-send hook (:func:`unrouted_context`),
under the route ``unmatched``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from typing import cast

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, HTTPResponseStartEvent, Message, Receive, Scope, Send

from api.http.input_guard import bound_query_dates, percent_encoded
from api.service.metrics import Metrics
from api.service.observability import bind_log_context

__all__ = [
    "PROBES",
    "REQUEST_ID_HEADER",
    "RequestContextMiddleware",
    "no_store_api_answers",
    "request_id_from",
    "unrouted_context",
]

REQUEST_ID_HEADER = "x-request-id"
_SAFE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")

access_log = logging.getLogger("sre_judge.access")

#: polled by orchestrators and Prometheus: logged at DEBUG unless they fail
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})
#: the methods a metric label or an access line names; any other is ``other`` (a routing
#: refusal reaches the hook whatever method the client made up)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"})
#: the status recorded for a request cancelled before it was answered (nginx's "client
#: closed request")
_CANCELLED = 499
#: the key in ``scope["state"]`` of a request the middleware took
_ROUTED = "sre_judge.request_context"
#: the key in ``scope["state"]`` of an unrouted request's id, status and start
_UNROUTED = "sre_judge.unrouted"


def request_id_from(scope: Scope) -> str:
    """The client's request id when it is safe to echo and log, else a new one."""
    for name, value in scope.get("headers", []):
        if name.lower() == REQUEST_ID_HEADER.encode():
            candidate = value.decode("latin-1").strip()
            if _SAFE_ID.fullmatch(candidate):
                return candidate
            break
    return uuid.uuid4().hex


class RequestContextMiddleware(ASGIMiddleware):
    """Binds the request id, adds it to the response, logs and measures the request (in
    the metrics of the app's runtime, ``app.state.metrics``)."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        """Run the rest of the stack with the request id bound."""
        request_id = request_id_from(scope)
        scope["state"][_ROUTED] = True
        query = percent_encoded(scope.get("query_string", b""))
        scope["query_string"] = bound_query_dates(query)
        status: int | None = None  # until the answer starts
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                _with_request_id(message, request_id)
            await send(message)

        with bind_log_context(request_id=request_id):
            try:
                await next_app(scope, receive, send_with_id)
            except asyncio.CancelledError:
                status = status or _CANCELLED  # not answered: no 500 either
                raise
            finally:
                route = scope.get("path_template") or "unmatched"
                _record(scope, route, status or 500, time.perf_counter() - started)


def _with_request_id(message: Message, request_id: str) -> None:
    """Set ``X-Request-ID`` on a response start (replacing one a handler set)."""
    start = cast("HTTPResponseStartEvent", message)
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"x-request-id"]
    headers.append((b"x-request-id", request_id.encode()))
    start["headers"] = headers


def _record(scope: Scope, route: str, status: int, seconds: float) -> None:
    """The request's access line and its observation in the duration histogram."""
    method = scope.get("method", "")
    method = method if method in _METHODS else "other"
    metrics: Metrics = scope["app"].state.metrics
    metrics.http_requests.labels(method, route, str(status)).observe(seconds)
    quiet = route in PROBES and status < 400
    access_log.log(
        logging.DEBUG if quiet else logging.INFO,
        "%s %s %d",
        method,
        route,
        status,
        extra={
            "method": method,
            "route": route,
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
        },
    )


async def unrouted_context(message: Message, scope: Scope) -> None:
    """A before-send hook: the request id, access line and count of a response sent
    without :class:`RequestContextMiddleware` (routing refused the request), timed from
    its start to its last byte (routing itself takes microseconds)."""
    state = scope.get("state", {})
    if scope.get("type") != ScopeType.HTTP or state.get(_ROUTED):
        return
    if message["type"] == "http.response.start":
        request_id = request_id_from(scope)
        state[_UNROUTED] = (request_id, int(message["status"]), time.perf_counter())
        _with_request_id(message, request_id)
        return
    if message["type"] == "http.response.body" and not message.get("more_body", False):
        request_id, status, started = state.pop(
            _UNROUTED, (request_id_from(scope), 500, time.perf_counter())
        )
        with bind_log_context(request_id=request_id):  # the access line names the request
            _record(scope, "unmatched", status, time.perf_counter() - started)


async def no_store_api_answers(message: Message, scope: Scope) -> None:
    """A before-send hook: every ``/v1`` answer says ``Cache-Control: no-store`` unless it
    says otherwise. Answers hold ground truths (a scenario, its versions, an admin's
    grading, exports), diagnoses and secrets (a new token, a webhook's signing secret):
    no browser or proxy cache may keep them, as none keeps a workbench page."""
    if message["type"] != "http.response.start" or not scope.get("path", "").startswith("/v1/"):
        return
    headers = list(message.get("headers", []))
    if all(name.lower() != b"cache-control" for name, _ in headers):
        headers.append((b"cache-control", b"no-store"))
        message["headers"] = headers
