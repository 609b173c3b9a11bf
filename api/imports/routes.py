"""Imports over HTTP: upload an SREGym results archive or a JSONL stream, follow the job.

The body is the file itself (``Content-Type`` says which: ``application/gzip`` or
``application/zip`` for an SREGym archive, ``application/x-ndjson`` for JSON lines;
``application/octet-stream`` is told apart by its first bytes), read
in chunks up to ``import_max_bytes``; the app's JSON-only guard does not apply here,
only its query-parameter checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)
from litestar.params import FromPath, FromQuery, QueryParameter

from api.http.auth import require
from api.http.input_guard import check_params
from api.http.problems import ApiProblem
from api.imports.jobs import (
    IMPORT_MEDIA_TYPES,
    ImportJobPublic,
    import_job,
    import_job_public,
    start_import,
)
from api.service.principal import Principal
from api.service.services import Services

__all__ = ["create_import", "get_import"]


def _upload_body() -> RequestBody:
    binary = OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY))
    return RequestBody(
        content={"application/octet-stream": binary},
        description=(
            "the SREGym results archive, or the JSON lines, as the body itself; "
            "Content-Type application/octet-stream (told apart by the first bytes) or "
            + ", ".join(t for t in sorted(IMPORT_MEDIA_TYPES) if t != "application/octet-stream")
        ),
        required=True,
    )


@dataclass
class _UploadOperation(Operation):
    """The operation of ``POST /v1/imports``, with its raw upload body documented."""

    def __post_init__(self) -> None:
        if self.request_body is None:
            self.request_body = _upload_body()


async def _params_only(request: Request[Any, Any, Any]) -> None:
    """The app's input guard without its JSON body check (the body is a file)."""
    check_params(request)


async def _read_body(request: Request[Any, Any, Any], limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
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


@post(
    "/v1/imports",
    guards=[require("admin")],
    before_request=_params_only,
    request_max_body_size=None,
    operation_class=_UploadOperation,
    operation_id="createImport",
    summary="Import an SREGym results archive (tar.gz, zip) or JSON lines, in the background",
    description=(
        "The body is the file: Content-Type application/gzip or application/zip for an "
        "SREGym results folder (`<datetime>/<agent>/<problem_id>/...csv`; ground truths "
        "from a problems.jsonl or problems.yaml in it, else from the registered scenarios), "
        "application/x-ndjson for historic submissions as `sre-judge import jsonl` reads "
        "them. Checked and stored whole before the 202 (names leaving the archive, links, "
        "sizes past the limits are refused with 422), then imported by a background job: "
        "follow it at the Location. Importing the same rows again stores nothing twice."
    ),
    tags=["imports"],
    status_code=202,
)
async def create_import(
    request: Request[Any, Any, Any],
    services: NamedDependency[Services],
    principal: NamedDependency[Principal],
    rubric: FromQuery[str | None] = None,
    strict: Annotated[
        bool,
        QueryParameter(
            description="JSON lines only: import nothing if any line is bad (the job fails "
            "and lists them), as `sre-judge import jsonl --strict`"
        ),
    ] = False,
) -> Response[ImportJobPublic]:
    """202 with the queued job and its Location."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in IMPORT_MEDIA_TYPES:
        accepted = ", ".join(sorted(IMPORT_MEDIA_TYPES))
        raise ApiProblem(
            415,
            "Unsupported media type",
            f"Content-Type: {media_type or 'unstated'} is not one of {accepted}",
            field="Content-Type",
        )
    data = await _read_body(request, services.settings.import_max_bytes)
    job = await start_import(
        services, data, media_type, rubric=rubric, actor=principal.id, strict=strict
    )
    return Response(
        import_job_public(job), status_code=202, headers={"Location": f"/v1/imports/{job.id}"}
    )


@get(
    "/v1/imports/{job_id:str}",
    guards=[require("admin")],
    operation_id="getImport",
    summary="An import job: state, rows done of total, rows refused, summary",
    tags=["imports"],
)
async def get_import(job_id: FromPath[str], services: NamedDependency[Services]) -> ImportJobPublic:
    """The job as it stands; 404 for an unknown id."""
    return await import_job(services, job_id)
