"""The pages' ``before_request``: the API's checks of parameters, and forms in place of
JSON bodies (the API's own hook refuses every body that is not JSON)."""

from __future__ import annotations

from typing import Any

from litestar import Request

from api.http.input_guard import check_params, not_utf8, query_items, unstorable
from api.http.problems import ApiProblem
from storage.storable import printable

__all__ = ["form_sent", "refuse_unstorable_form"]

_FORM = "application/x-www-form-urlencoded"


async def form_sent(request: Request[Any, Any, Any]) -> bool:
    """Whether the request carries a form: False without a body; 415 for a body that is
    not a URL-encoded form, the only body a page takes (so nothing reads a multipart
    body, whose fields need not even be UTF-8)."""
    if not await request.body():
        return False
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != _FORM:
        raise ApiProblem(415, "Unsupported media type", f"Content-Type: a page takes {_FORM}")
    return True


async def refuse_unstorable_form(request: Request[Any, Any, Any]) -> None:
    """422 on a parameter or form field that cannot be stored; 400 on one that is not
    UTF-8 text (read as sent: the form parser would put U+FFFD in its place and store
    that), and on a form with bytes outside ASCII (a form's text is percent-encoded, as
    browsers send it; the parser would read raw bytes as Latin-1 and store other text);
    415 for a body that is not a form."""
    check_params(request)
    if request.method not in ("POST", "PUT", "PATCH") or not await form_sent(request):
        return
    body = await request.body()
    if not body.isascii():
        detail = "body: a form's text is percent-encoded UTF-8, not raw bytes"
        raise ApiProblem(400, "Malformed request", detail, field="body")
    for name, value in query_items(body):
        shown = printable(name)
        if not_utf8(name) or not_utf8(value):
            detail = f"{shown}: not valid UTF-8 text"
            raise ApiProblem(400, "Malformed request", detail, field=shown)
        problem = unstorable(name) or unstorable(value)
        if problem:
            raise ApiProblem(422, "Invalid request", f"{shown}: {problem}", field=shown)
