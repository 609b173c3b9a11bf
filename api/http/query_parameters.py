"""Query parameters a ``/v1`` route does not take, or that it is given twice, are refused.

A filter with a misspelt name (``?agnet=x``) or one the route does not have
(``/v1/stats/pass-rates?passed=true``) would otherwise be dropped, and the answer would
be about every row: a script would get the wrong set without an error. So a ``/v1``
request carrying a query parameter its route does not take is answered 400
(problem+json, ``Unknown query parameter``), every unknown parameter named in
``errors[].field``, before anything else of the route runs (its guards, hooks and
handler): nothing is read or changed.

A parameter that takes one value, given twice (``?agent=a&agent=b``,
``?group_by=agent&group_by=model``, ``?a.model=x&a.model=y``), would keep only its last
value, the others dropped as silently: it is answered the same way (400, ``Repeated
query parameter``, each such parameter named), as a key given twice in a JSON body is
refused (which of its values was meant is unknown). A parameter a route takes as a list
(a sequence in its signature, sent once per value) may be repeated; lists of this API are
comma-separated (``group_by=agent,model``). Unknown parameters are named first: a request
with both is told of those.

What a route takes is Litestar's own record of it: the query parameters of the route's
kwargs model, which holds the handler's parameters and those of its dependencies (the
names a client sends: ``set``, not the handler's ``scenario_set``), the same record the
OpenAPI document is made from. A route that also reads parameters from its query itself
(a comparison's arms, ``a.<field>`` and ``b.<field>``) lists their prefixes in
:data:`READ_BY_ROUTE`: any name under them is left to the route, which refuses a field it
does not take (422 naming it); any other name the route does not take is unknown here.
The workbench pages, the sign-in, ``/schema`` and the probes are not under ``/v1`` and
keep taking any query; so does ``OPTIONS``, which answers with the methods of a path
whatever it is asked.

The query is read as sent (:func:`api.http.input_guard.query_items`). A name that cannot
be stored (a NUL character, bytes that are not UTF-8) is left to the input guard, which
answers naming it, as for any other parameter.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, NamedTuple

from litestar import Litestar, Request
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Receive, Scope, Send

from api.http.input_guard import query_items
from api.http.problems import problem_response
from storage.storable import printable, unstorable

__all__ = ["READ_BY_ROUTE", "RefuseUnknownQueryParameters"]

#: the API's prefix: only these routes are checked
API_PREFIX = "/v1/"
#: routes (path templates) that read some of their query themselves, with the prefixes
#: of the names they read (a comparison's arms ``a.<field>``, ``b.<field>``: see
#: ``api.reports.params``); they refuse a field under those prefixes that they do not take
READ_BY_ROUTE: dict[str, tuple[str, ...]] = {"/v1/stats/compare": ("a.", "b.")}


class _Taken(NamedTuple):
    """The query parameters of one route (path template and method)."""

    #: the names it takes
    names: frozenset[str]
    #: those of them it takes as lists, one value per repetition
    repeatable: frozenset[str]
    #: prefixes of names the route reads itself (:data:`READ_BY_ROUTE`)
    read_by_route: tuple[str, ...]


def _taken_names(app: Litestar) -> dict[tuple[str, str], _Taken]:
    """(path template, method) -> the query parameters its route takes."""
    names: dict[tuple[str, str], _Taken] = {}
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for method, (_, kwargs_model) in route.route_handler_map.items():
            params = kwargs_model.expected_query_params
            names[(route.path_format, method)] = _Taken(
                names=frozenset(p.field_alias for p in params),
                repeatable=frozenset(p.field_alias for p in params if p.is_sequence),
                read_by_route=READ_BY_ROUTE.get(route.path_format, ()),
            )
    return names


class _Refusal(NamedTuple):
    """What the middleware answers: its title, its detail's words before and after the
    names, the message of each name's error, and the names."""

    title: str
    before: str
    after: str
    message: str
    names: list[str]


class RefuseUnknownQueryParameters(ASGIMiddleware):
    """400 naming each query parameter a ``/v1`` route does not take, or takes once and
    is given twice (see the module).

    One instance serves one application: the table of what each route takes is read
    from that application's routes on its first checked request and kept."""

    scopes = (ScopeType.HTTP,)

    def __init__(self) -> None:
        self._taken: dict[tuple[str, str], _Taken] | None = None

    def _refusal(self, scope: Scope) -> _Refusal | None:
        """The unknown query parameters of the request (in the order sent, each once),
        else those given twice that its route takes once; None when there are none."""
        method = str(scope.get("method", ""))
        path = scope.get("path", "")
        query = scope.get("query_string", b"")
        if not query or method == "OPTIONS" or not path.startswith(API_PREFIX):
            return None
        if self._taken is None:
            self._taken = _taken_names(scope["litestar_app"])
        taken = self._taken.get((scope.get("path_template", ""), method))
        if taken is None:
            return None
        sent = [name for name, _ in query_items(query) if not unstorable(name)]
        unknown = [
            name
            for name in dict.fromkeys(sent)
            if name not in taken.names and not name.startswith(taken.read_by_route)
        ]
        if unknown:
            return _Refusal(
                "Unknown query parameter",
                "unknown query",
                "see the route in /schema",
                "not a parameter of this route",
                unknown,
            )
        counts = Counter(sent)
        repeated = [name for name in counts if counts[name] > 1 and name not in taken.repeatable]
        if repeated:
            return _Refusal(
                "Repeated query parameter",
                "query",
                "given more than once; each takes one value (a list is comma-separated)",
                "given more than once",
                repeated,
            )
        return None

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        """Answer 400 for unknown or repeated query parameters; else run the route."""
        refusal = self._refusal(scope)
        if refusal is None:
            await next_app(scope, receive, send)
            return
        shown = [printable(name) for name in refusal.names]
        errors = [{"field": name, "message": refusal.message} for name in shown]
        noun = "parameter" if len(shown) == 1 else "parameters"
        detail = f"{refusal.before} {noun} {', '.join(shown)}: {refusal.after}"
        request = Request[Any, Any, Any](scope, receive, send)
        response = problem_response(
            400, refusal.title, detail, instance=request.url.path, errors=errors
        )
        is_head = scope.get("method") == "HEAD"
        await response.to_asgi_response(None, request, is_head_response=is_head)(
            scope, receive, send
        )
