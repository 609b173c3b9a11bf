"""Per-request context: a request id, one access log line, the request duration metric.

The request id is the client's ``X-Request-ID`` when it is a short token of safe
characters, else a new one; it is bound to every log line of the request and returned
in the response's ``X-Request-ID`` header. The access line names method, route
template, status and duration, never the query string, headers or body; successful
probes (``/healthz``, ``/readyz``, ``/metrics``) only at DEBUG.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from api.http.input_guard import bound_query_dates
from api.service.metrics import Metrics
from api.service.observability import bind_log_context

__all__ = ["PROBES", "REQUEST_ID_HEADER", "RequestContextMiddleware", "request_id_from"]

REQUEST_ID_HEADER = "x-request-id"
_SAFE_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")

access_log = logging.getLogger("sre_judge.access")

#: polled by orchestrators and Prometheus: logged at DEBUG unless they fail
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})


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
        scope["query_string"] = bound_query_dates(scope.get("query_string", b""))
        status = 500
        started = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"
                ]
                headers.append((b"x-request-id", request_id.encode()))
                message["headers"] = headers
            await send(message)

        with bind_log_context(request_id=request_id):
            try:
                await next_app(scope, receive, send_with_id)
            finally:
                seconds = time.perf_counter() - started
                route = scope.get("path_template") or "unmatched"
                method = scope.get("method", "")
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
