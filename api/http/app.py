"""``create_app``: the one place where settings, storage, judges and routes are wired."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins.pydantic import PydanticPlugin
from litestar.routes import HTTPRoute
from litestar.types import Message, Scope
from sqlalchemy.ext.asyncio import AsyncEngine

from api.app import route_handlers
from api.http.auth import current_principal
from api.http.input_guard import refuse_unstorable_input
from api.http.limits import SubmissionLimits
from api.http.middleware import RequestContextMiddleware
from api.http.observability import litestar_logging_config
from api.http.openapi import document_on_first_read
from api.http.problems import exception_handlers
from api.service.runtime import Runtime
from api.service.settings import Settings
from api.web import WorkbenchPlugin, offline_docs
from judge.backends import JudgeBackend

__all__ = ["LOCAL_HOSTS", "AllowEveryMethod", "create_app"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class AllowEveryMethod:
    """A before-send hook: an ``OPTIONS`` answer's ``Allow`` lists every method of its path.

    Litestar (2.25) makes a path's ``OPTIONS`` handler with the path's first route
    handler, and that handler keeps listing the first handler's methods when a second
    one (``GET`` beside ``POST``) joins the path. The hook rewrites the header from the
    app's routes by the request's path template (``scope["path_template"]``).
    """

    def __init__(self) -> None:
        self._allow: dict[str, bytes] | None = None

    def _table(self, app: Litestar) -> dict[str, bytes]:
        if self._allow is None:
            methods: dict[str, set[str]] = {}
            for route in app.routes:
                if isinstance(route, HTTPRoute):
                    methods.setdefault(route.path_format, set()).update(route.methods)
            self._allow = {p: ", ".join(sorted(m)).encode() for p, m in methods.items()}
        return self._allow

    async def __call__(self, message: Message, scope: Scope) -> None:
        """Replace ``Allow`` on the start of an ``OPTIONS`` answer."""
        if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
            return
        allow = self._table(scope["app"]).get(scope.get("path_template", ""))
        if allow is not None:
            headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"allow"]
            message["headers"] = [*headers, (b"allow", allow)]


def _openapi_config() -> OpenAPIConfig:
    """The OpenAPI document at /schema, its page served from the swagger-ui-py package's
    files (so /schema works offline)."""
    return OpenAPIConfig(
        title="sre-judge", version="1", path=SCHEMA_PATH, render_plugins=[offline_docs()]
    )


#: where the OpenAPI document and its page are served
SCHEMA_PATH = "/schema"


async def _before_request(request: Request[Any, Any, Any]) -> None:
    """Complete the OpenAPI document on its first read; refuse unstorable input."""
    if request.url.path.startswith(SCHEMA_PATH):
        document_on_first_read(request.app)
    await refuse_unstorable_input(request)


def create_app(
    settings: Settings,
    engine: AsyncEngine | None = None,
    backends: Mapping[str, JudgeBackend] | None = None,
    *,
    start_workers: bool = True,
) -> Litestar:
    """Build the app. The database must already be migrated (``serve`` does it).

    ``engine`` and ``backends`` (judge spec -> backend) are seams for tests; without
    them the runtime makes its own from the settings.
    """
    if settings.allow_anonymous and settings.host not in LOCAL_HOSTS:
        raise ValueError("allow_anonymous is refused unless the server is bound to 127.0.0.1")
    runtime = Runtime(
        settings,
        engine=engine,
        backends=backends,
        workers=start_workers,
        checkpoints=True,
        import_jobs=True,
        announce=True,
    )
    services, metrics = runtime.services, runtime.metrics
    limits = SubmissionLimits(settings, services.store, metrics)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        async with runtime:
            yield

    app = Litestar(
        route_handlers=route_handlers(),
        dependencies={
            "services": Provide(lambda: services, sync_to_thread=False),
            "principal": Provide(current_principal),
            "limits": Provide(lambda: limits, sync_to_thread=False),
            "metrics": Provide(lambda: metrics, sync_to_thread=False),
        },
        exception_handlers=exception_handlers,
        before_request=_before_request,
        middleware=[RequestContextMiddleware(metrics)],
        logging_config=litestar_logging_config(),
        openapi_config=_openapi_config(),
        request_max_body_size=settings.max_body_bytes,
        # None, not False: False would override the models' own strict fields (StrictInt
        # then took "3"); None lets each field's strictness hold, dates still parse
        plugins=[PydanticPlugin(validate_strict=None), WorkbenchPlugin()],  # type: ignore[list-item]
        lifespan=[lifespan],
        before_send=[AllowEveryMethod()],
    )
    app.state.services = services
    app.state.metrics = metrics
    app.state.workers = runtime.workers
    return app
