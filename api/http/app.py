"""``create_app``: the one place where settings, storage, judges and routes are wired."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins.pydantic import PydanticPlugin
from litestar.routes import HTTPRoute
from sqlalchemy.ext.asyncio import AsyncEngine

from api.http.auth import current_principal
from api.http.input_guard import refuse_unstorable_input
from api.http.limits import SubmissionLimits
from api.http.middleware import RequestContextMiddleware
from api.http.observability import litestar_logging_config
from api.http.openapi import document_api
from api.http.problems import exception_handlers
from api.http.routes import ROUTE_HANDLERS
from api.service.runtime import Runtime
from api.service.settings import Settings
from api.web import WorkbenchPlugin, offline_docs
from judge.backends import JudgeBackend

__all__ = ["LOCAL_HOSTS", "create_app"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def _openapi_config() -> OpenAPIConfig:
    """The OpenAPI document at /schema, its page served from the swagger-ui-py package's
    files (so /schema works offline)."""
    return OpenAPIConfig(
        title="sre-judge", version="1", path="/schema", render_plugins=[offline_docs()]
    )


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
        route_handlers=ROUTE_HANDLERS,
        dependencies={
            "services": Provide(lambda: services, sync_to_thread=False),
            "principal": Provide(current_principal),
            "limits": Provide(lambda: limits, sync_to_thread=False),
            "metrics": Provide(lambda: metrics, sync_to_thread=False),
        },
        exception_handlers=exception_handlers,
        before_request=refuse_unstorable_input,
        middleware=[RequestContextMiddleware(metrics)],
        logging_config=litestar_logging_config(),
        openapi_config=_openapi_config(),
        request_max_body_size=settings.max_body_bytes,
        # None, not False: False would override the models' own strict fields (StrictInt
        # then took "3"); None lets each field's strictness hold, dates still parse
        plugins=[PydanticPlugin(validate_strict=None), WorkbenchPlugin()],  # type: ignore[list-item]
        lifespan=[lifespan],
    )
    document_api(app)
    allow_every_method(app)
    app.state.services = services
    app.state.metrics = metrics
    app.state.workers = runtime.workers
    return app


def allow_every_method(app: Litestar) -> None:
    """Make ``OPTIONS`` list every method of its path in ``Allow``.

    Litestar (2.25) makes a path's ``OPTIONS`` handler with the path's first route
    handler; when a second handler for the same path (``GET`` beside ``POST``) joins,
    the new route keeps that ``OPTIONS`` handler, which still reads the first route's
    methods. Point each such handler back at the route that serves it."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            fn = handler.fn
            if fn.__name__ != "options_handler" or "self" not in fn.__code__.co_freevars:
                continue
            cell = (fn.__closure__ or ())[fn.__code__.co_freevars.index("self")]
            if isinstance(cell.cell_contents, HTTPRoute):
                cell.cell_contents = route
