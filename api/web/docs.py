"""``/schema`` without the internet: Swagger UI from the ``swagger-ui-py`` package's own
pinned files, served by the app, and an initialiser that is a file (no inline script)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import swagger_ui
from litestar import Request
from litestar.openapi.plugins import OpenAPIRenderPlugin

__all__ = ["SWAGGER_ASSETS", "SWAGGER_PREFIX", "OfflineSwaggerPlugin"]

#: the Swagger UI distribution inside the swagger-ui-py wheel (version pinned by pip)
SWAGGER_ASSETS = Path(swagger_ui.__file__).parent / "static"
SWAGGER_PREFIX = "/static/swagger-ui"


class OfflineSwaggerPlugin(OpenAPIRenderPlugin):
    """Swagger UI whose every script, style and icon is served by this app."""

    def __init__(self, *, path: str = "/", **kwargs: Any) -> None:
        """Serve the page at ``path`` under the OpenAPI config's path (``/schema``)."""
        super().__init__(path=path, favicon="", **kwargs)

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        """The page: the spec's URL in a data attribute, the initialiser a static file."""
        spec_url = html.escape(self.get_openapi_json_route(request), quote=True)
        return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>sre-judge API</title>
<link rel="stylesheet" href="{SWAGGER_PREFIX}/swagger-ui.css">
<link rel="icon" href="/static/web/favicon.svg">
</head>
<body>
<div id="swagger-ui" data-spec-url="{spec_url}"></div>
<script src="{SWAGGER_PREFIX}/swagger-ui-bundle.js"></script>
<script src="/static/web/swagger-init.js"></script>
</body>
</html>""".encode()
