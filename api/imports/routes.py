"""Imports over HTTP: upload an SREGym results archive or a JSONL stream, follow the job.

The body is the file itself (``Content-Type`` says which: ``application/gzip`` or
``application/zip`` for an SREGym archive, ``application/x-ndjson`` for JSON lines;
``application/octet-stream`` is told apart by its first bytes), read
in chunks up to ``import_max_bytes``; the app's JSON-only guard does not apply here,
only its query-parameter checks.
"""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, QueryParameter

from api.http.auth import require
from api.http.uploads import file_operation, media_type_of, params_only, read_upload
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


_UPLOAD = file_operation(
    "the SREGym results archive, or the JSON lines, as the body itself; "
    "Content-Type application/octet-stream (told apart by the first bytes) or "
    + ", ".join(t for t in sorted(IMPORT_MEDIA_TYPES) if t != "application/octet-stream")
)


@post(
    "/v1/imports",
    guards=[require("admin")],
    before_request=params_only,
    request_max_body_size=None,
    operation_class=_UPLOAD,
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
    media_type = media_type_of(request, IMPORT_MEDIA_TYPES)
    data = await read_upload(request, services.settings.import_max_bytes)
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
