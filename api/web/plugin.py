"""``WorkbenchPlugin``: the pages, their templates and assets, and their headers."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import Request, Response, Router
from litestar.config.app import AppConfig
from litestar.di import Provide
from litestar.exceptions import NotAuthorizedException
from litestar.plugins import InitPluginProtocol
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.response import Redirect
from litestar.static_files import create_static_files_router
from litestar.template import TemplateConfig

from api.app import page_handlers
from api.http.problems import exception_handlers as problem_handlers
from api.web.docs import SWAGGER_ASSETS, SWAGGER_PREFIX, OfflineSwaggerPlugin
from api.web.input_guard import refuse_unstorable_form
from api.web.pages import page, utc_time
from api.web.security import html_security_headers
from api.web.sessions import signed_in

__all__ = ["WorkbenchPlugin", "offline_docs"]

_HERE = Path(__file__).parent


def offline_docs() -> OfflineSwaggerPlugin:
    """The render plugin of ``/schema`` (for ``OpenAPIConfig(render_plugins=...)``)."""
    return OfflineSwaggerPlugin()


@cache
def _environment() -> Environment:
    """The pages' Jinja2 environment, one per process: every app shares its compiled
    templates (an app per test, or per worker process, compiles none of them again)."""
    # autoescape everything: diagnoses, ground truths and judge replies are untrusted
    environment = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
    )
    environment.filters["utc"] = utc_time
    return environment


def _back_to(request: Request[Any, Any, Any]) -> str:
    """Where to go once signed in: the page asked for, its query kept; for a form sent
    after the session ended (no page to GET at its action), the page it was sent from
    (its ``Referer``, sent on this origin only), else the home page."""
    if request.method in ("GET", "HEAD"):
        query = request.url.query
        return request.url.path + (f"?{query}" if query else "")
    sent_from = urlsplit(request.headers.get("referer", ""))
    if sent_from.netloc != request.url.netloc or not sent_from.path.startswith("/"):
        return "/"
    return sent_from.path + (f"?{sent_from.query}" if sent_from.query else "")


def _web_error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    """Errors of the pages as pages: sign-in for the signed-out, else the problem's
    status, title and detail from the API's one mapping table."""
    if isinstance(exc, NotAuthorizedException):
        return Redirect(f"/login?next={quote(_back_to(request))}", status_code=303)
    problem = problem_handlers[Exception](request, exc)
    body = problem.content
    who = request.scope.get("state", {}).get("signed_in")
    return page(
        "error.html",
        who,
        status_code=problem.status_code,
        title=body.get("title", "Error"),
        detail=body.get("detail", ""),
    )


class WorkbenchPlugin(InitPluginProtocol):
    """Adds the workbench to an app whose ``state.services`` holds the services."""

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        """Register routes, templates, static files and the HTML security headers."""
        pages = Router(
            path="/",
            route_handlers=page_handlers(),
            dependencies={"who": Provide(signed_in)},
            exception_handlers={Exception: _web_error},
            before_request=refuse_unstorable_form,
            include_in_schema=False,
        )
        app_config.route_handlers.extend(
            [
                pages,
                create_static_files_router(
                    path="/static/web", directories=[_HERE / "static"], include_in_schema=False
                ),
                create_static_files_router(
                    path=SWAGGER_PREFIX, directories=[SWAGGER_ASSETS], include_in_schema=False
                ),
            ]
        )
        app_config.template_config = TemplateConfig(
            instance=JinjaTemplateEngine.from_environment(_environment())
        )
        app_config.middleware.insert(0, html_security_headers)
        return app_config
