"""``create_app``: the one place where settings, storage, judges and routes are wired."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, Request
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.plugins.pydantic import PydanticPlugin
from litestar.routes import HTTPRoute
from litestar.types import Message, Scope
from sqlalchemy.engine import Engine

from api.app import route_handlers
from api.http.auth import LOCAL_HOSTS, check_anonymous_use, current_principal
from api.http.input_guard import refuse_unstorable_input
from api.http.limits import SubmissionLimits
from api.http.middleware import (
    RequestContextMiddleware,
    no_store_api_answers,
    unrouted_context,
)
from api.http.observability import litestar_logging_config
from api.http.openapi import document_on_first_read, document_router
from api.http.preconditions import if_match_value
from api.http.problems import exception_handlers
from api.http.query_parameters import RefuseUnknownQueryParameters
from api.service.metrics import Metrics
from api.service.runtime import Runtime, StartFiles
from api.service.services import Services
from api.service.settings import Settings
from api.web import WorkbenchPlugin, offline_docs
from judge.backends import JudgeBackend

__all__ = ["LOCAL_HOSTS", "AllowEveryMethod", "create_app"]


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
        """Replace ``Allow`` on the start of a successful ``OPTIONS`` answer (an error,
        such as the 404 of a path that serves nothing, allows nothing)."""
        if message["type"] != "http.response.start" or scope.get("method") != "OPTIONS":
            return
        if message["status"] >= 400:
            return
        allow = self._table(scope["app"]).get(scope.get("path_template", ""))
        if allow is not None:
            headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"allow"]
            message["headers"] = [*headers, (b"allow", allow)]


def _openapi_config() -> OpenAPIConfig:
    """The OpenAPI document at /schema, its page served from the swagger-ui-py package's
    files (so /schema works offline); any other path under /schema is a 404 problem."""
    return OpenAPIConfig(
        title="sre-judge",
        version="1",
        path=SCHEMA_PATH,
        render_plugins=[offline_docs()],
        openapi_router=document_router(SCHEMA_PATH),
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
    engine: Engine | None = None,
    backends: Mapping[str, JudgeBackend] | None = None,
    *,
    start_workers: bool = True,
    start_files: StartFiles | None = None,
) -> Litestar:
    """Build the app. The database must already be migrated (``serve`` does it).

    ``engine`` and ``backends`` (judge spec -> backend) are seams for tests; without
    them the runtime makes its own from the settings. ``start_files``: the settings'
    files as ``serve`` read them before migrating (read here otherwise).

    The routes do not depend on the settings, only the runtime does (services, metrics,
    workers: ``app.state``); so the Litestar application, whose making parses every
    handler's signature, is made once per process and request-size limit and reused by
    the next ``create_app`` once the runtime it served has stopped (see ``_Shells``).
    """
    check_anonymous_use(settings.allow_anonymous, settings.host)
    runtime = Runtime(
        settings,
        engine=engine,
        backends=backends,
        workers=start_workers,
        checkpoints=True,
        import_jobs=True,
        announce=True,
        start_files=start_files,
    )
    app = _SHELLS.take(settings.max_body_bytes)
    app.state.runtime = runtime
    app.state.services = runtime.services
    app.state.metrics = runtime.metrics
    app.state.limits = SubmissionLimits(settings, runtime.services.store, runtime.metrics)
    app.state.workers = runtime.workers
    return app


def _services(state: State) -> Services:
    return state.services  # type: ignore[no-any-return]


def _limits(state: State) -> SubmissionLimits:
    return state.limits  # type: ignore[no-any-return]


def _metrics(state: State) -> Metrics:
    return state.metrics  # type: ignore[no-any-return]


@asynccontextmanager
async def _lifespan(app: Litestar) -> AsyncIterator[None]:
    """Run the app's runtime; the application is free for another once it stopped."""
    try:
        async with app.state.runtime:
            yield
    finally:
        _SHELLS.give_back(app)


def _make_shell(max_body_bytes: int) -> Litestar:
    """The Litestar application: routes, dependencies (read from ``app.state``), hooks."""
    return Litestar(
        route_handlers=route_handlers(),
        dependencies={
            "services": Provide(_services, sync_to_thread=False),
            "principal": Provide(current_principal),
            "limits": Provide(_limits, sync_to_thread=False),
            "metrics": Provide(_metrics, sync_to_thread=False),
            "if_match": Provide(if_match_value),
        },
        exception_handlers=exception_handlers,
        before_request=_before_request,
        middleware=[RequestContextMiddleware(), RefuseUnknownQueryParameters()],
        logging_config=litestar_logging_config(),
        openapi_config=_openapi_config(),
        request_max_body_size=max_body_bytes,
        # None, not False: False would override the models' own strict fields (StrictInt
        # then took "3"); None lets each field's strictness hold, dates still parse
        plugins=[PydanticPlugin(validate_strict=None), WorkbenchPlugin()],  # type: ignore[arg-type]
        lifespan=[_lifespan],
        before_send=[AllowEveryMethod(), unrouted_context, no_store_api_answers],
    )


class _Shells:
    """Litestar applications made in this process, by request-size limit, that no
    runtime uses now. An application is lent from ``create_app`` until its lifespan
    ends; one created but never started is simply not given back."""

    def __init__(self) -> None:
        self._free: dict[int, list[Litestar]] = {}
        self._lock = threading.Lock()

    def take(self, max_body_bytes: int) -> Litestar:
        """A free application for this limit, or a new one."""
        with self._lock:
            free = self._free.get(max_body_bytes)
            if free:
                return free.pop()
        app = _make_shell(max_body_bytes)
        app.state.max_body_bytes = max_body_bytes
        return app

    def give_back(self, app: Litestar) -> None:
        """``app``'s runtime stopped: lend it to the next ``create_app``."""
        with self._lock:
            self._free.setdefault(app.state.max_body_bytes, []).append(app)


_SHELLS = _Shells()
