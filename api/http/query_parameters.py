"""Query parameters a ``/v1`` route does not take are refused, not ignored.

A filter with a misspelt name (``?agnet=x``) or one the route does not have
(``/v1/stats/pass-rates?passed=true``) would otherwise be dropped, and the answer would
be about every row: a script would get the wrong set without an error. So a ``/v1``
request carrying a query parameter its route does not take is answered 400
(problem+json), every unknown parameter named in ``errors[].field``, before anything
else of the route runs (its guards, hooks and handler): nothing is read or changed.

What a route takes is Litestar's own record of it: the query parameters of the route's
kwargs model, which holds the handler's parameters and those of its dependencies (the
names a client sends: ``set``, not the handler's ``scenario_set``), the same record the
OpenAPI document is made from. A route that reads its query itself (a comparison's
arms, ``a.<field>`` and ``b.<field>``) is listed in :data:`READ_BY_ROUTE` and refuses
what it does not take itself (422 naming it). The workbench pages, the
sign-in, ``/schema`` and the probes are not under ``/v1`` and keep taking any query;
so does ``OPTIONS``, which answers with the methods of a path whatever it is asked.

A name that cannot be stored (a NUL character, a lone surrogate) is left to the input
guard, which answers 422 naming it, as for any other parameter.
"""

from __future__ import annotations

from typing import Any

from litestar import Litestar, Request
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Receive, Scope, Send

from api.http.problems import problem_response
from storage.storable import printable, unstorable

__all__ = ["READ_BY_ROUTE", "RefuseUnknownQueryParameters"]

#: the API's prefix: only these routes are checked
API_PREFIX = "/v1/"
#: routes (path templates) that read their query themselves and refuse what they do not
#: take (a comparison's arms ``a.<field>``, ``b.<field>``: see ``api.reports.params``)
READ_BY_ROUTE = frozenset({"/v1/stats/compare"})


def _taken_names(app: Litestar) -> dict[tuple[str, str], frozenset[str]]:
    """(path template, method) -> the query parameters its route takes."""
    names: dict[tuple[str, str], frozenset[str]] = {}
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for method, (_, kwargs_model) in route.route_handler_map.items():
            taken = {parameter.field_alias for parameter in kwargs_model.expected_query_params}
            names[(route.path_format, method)] = frozenset(taken)
    return names


class RefuseUnknownQueryParameters(ASGIMiddleware):
    """400 naming each query parameter a ``/v1`` route does not take (see the module).

    One instance serves one application: the table of what each route takes is read
    from that application's routes on its first checked request and kept."""

    scopes = (ScopeType.HTTP,)

    def __init__(self) -> None:
        self._taken: dict[tuple[str, str], frozenset[str]] | None = None

    def _unknown(self, scope: Scope) -> list[str]:
        """The query parameters of the request that its route does not take, in the
        order sent, each once."""
        method = str(scope.get("method", ""))
        path = scope.get("path", "")
        if not scope.get("query_string") or method == "OPTIONS" or not path.startswith(API_PREFIX):
            return []
        if self._taken is None:
            self._taken = _taken_names(scope["litestar_app"])
        template = scope.get("path_template", "")
        taken = self._taken.get((template, method))
        if taken is None or template in READ_BY_ROUTE:
            return []
        sent = Request[Any, Any, Any](scope).query_params.keys()
        return [name for name in dict.fromkeys(sent) if name not in taken and not unstorable(name)]

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        """Answer 400 for unknown query parameters; else run the route."""
        unknown = self._unknown(scope)
        if not unknown:
            await next_app(scope, receive, send)
            return
        shown = [printable(name) for name in unknown]
        errors = [{"field": name, "message": "not a parameter of this route"} for name in shown]
        noun = "parameter" if len(shown) == 1 else "parameters"
        detail = f"unknown query {noun} {', '.join(shown)}: see the route in /schema"
        request = Request[Any, Any, Any](scope, receive, send)
        response = problem_response(
            400, "Unknown query parameter", detail, instance=request.url.path, errors=errors
        )
        is_head = scope.get("method") == "HEAD"
        await response.to_asgi_response(None, request, is_head_response=is_head)(
            scope, receive, send
        )
