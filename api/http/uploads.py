"""Routes whose body is a file, not JSON: an import archive, a batch results file.

Such a route reads its body in chunks up to a limit (413 naming ``body`` past it), takes
only the media types it names (415 naming ``Content-Type`` otherwise), skips the app's
JSON-only body guard (:func:`params_only` keeps its checks of query parameters and
headers, ``Content-Encoding`` included: a file is read as sent, never decoded) and
documents the raw body in the OpenAPI document (:func:`file_operation`).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from litestar import Request
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)
from pydantic import BaseModel

from api.http.input_guard import check_params
from api.http.problems import ApiProblem

__all__ = ["file_operation", "media_type_of", "params_only", "read_upload"]


def file_operation(
    description: str,
    media_types: Collection[str] | None = None,
    *,
    json_body: type[BaseModel] | None = None,
) -> type[Operation]:
    """An operation class documenting a raw file body (``description`` says what it is
    and which Content-Types it takes), for a route's ``operation_class``: binary, or
    text in each of ``media_types``; ``application/json`` (among them) as ``json_body``'s
    schema when given (:func:`api.http.openapi_schemas.document_request_bodies` puts it
    in, as for a body the route declares)."""

    @dataclass
    class FileOperation(Operation):
        """An operation whose request body is a file."""

        json_body: ClassVar[type[BaseModel] | None]

        def __post_init__(self) -> None:
            if self.request_body is None:
                if media_types is None:
                    binary = Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY)
                    content = {"application/octet-stream": OpenAPIMediaType(schema=binary)}
                else:
                    text = Schema(type=OpenAPIType.STRING)
                    content = {t: OpenAPIMediaType(schema=text) for t in media_types}
                self.request_body = RequestBody(
                    content=content, description=description, required=True
                )

    FileOperation.json_body = json_body
    return FileOperation


async def params_only(request: Request[Any, Any, Any]) -> None:
    """The app's input guard without its JSON body check (the body is a file)."""
    check_params(request)


def media_type_of(request: Request[Any, Any, Any], accepted: Collection[str]) -> str:
    """The request's media type, one of ``accepted``; a 415 naming ``Content-Type``
    otherwise."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in accepted:
        raise ApiProblem(
            415,
            "Unsupported media type",
            f"Content-Type: {media_type or 'unstated'} is not one of {', '.join(sorted(accepted))}",
            field="Content-Type",
        )
    return media_type


async def read_upload(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The body, read in chunks; a 413 naming ``body`` once it passes ``limit`` bytes (at
    once when Content-Length says so)."""
    declared = request.headers.get("content-length")
    if declared and declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ApiProblem(413, "Upload too large", f"body: more than {limit} bytes", field="body")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiProblem(
                413, "Upload too large", f"body: more than {limit} bytes", field="body"
            )
        chunks.append(chunk)
    return b"".join(chunks)
