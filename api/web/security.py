"""Headers of every HTML answer: a Content-Security-Policy that admits only the app's own
scripts (none inline), no framing, no sniffing, and no storing in any cache (a page may
show a ground truth, a diagnosis or a judge's evidence: the browser's history and disk
cache, and any proxy, keep none of it)."""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "DOCS_CSP", "html_security_headers"]

#: the workbench pages: nothing inline, nothing from another host
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
#: the API documentation page: Swagger UI sets style attributes, scripts stay the app's own
DOCS_CSP = CSP.replace("style-src 'self'", "style-src 'self' 'unsafe-inline'")

_EXTRA = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
)


def html_security_headers(app: ASGIApp) -> ASGIApp:
    """ASGI middleware: add the policy and the other headers to every ``text/html`` answer."""

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        policy = DOCS_CSP if scope["path"].startswith("/schema") else CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                content_type = dict(headers).get(b"content-type", b"")
                if content_type.startswith(b"text/html"):
                    headers.append((b"content-security-policy", policy.encode()))
                    headers.extend(h for h in _EXTRA if h[0] not in present)
                    message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_with_headers)

    return middleware
