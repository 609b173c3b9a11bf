"""Exporting stored gradings over HTTP: admins only (ground truths included).

``format=sregym&layout=file|folder`` gives imported SREGym rows back as SREGym wrote
them (every column and row, timed-out and failed-deploy attempts included): one CSV,
or the results folder as a ``tar.gz`` (default) or ``zip`` archive (``archive=``).

The export is written whole (memory, then a temporary file) before the answer starts,
so a failure while reading is a 500 problem, never a 200 that stops short; a complete
export states its ``Content-Length``, ``X-Export-Rows`` and ``Repr-Digest`` (SHA-256).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Annotated, Literal

from litestar import get
from litestar.datastructures import ResponseHeader
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery, QueryParameter
from litestar.response import Stream

from api.http.auth import require
from api.http.problems import ApiProblem
from api.reports.export_writer import ExportFailed, read_chunks, spool, write_export
from api.reports.exports import MEDIA_TYPES
from api.reports.filters import ReportFilter
from api.reports.params import report_filter
from api.reports.sregym_writer import (
    ARCHIVE_MEDIA_TYPES,
    SregymArchive,
    write_sregym_archive,
    write_sregym_file,
)
from api.service.services import Services

__all__ = ["export_gradings"]

_log = logging.getLogger(__name__)


@get(
    "/v1/exports/gradings",
    guards=[require("admin")],
    dependencies={"filters": Provide(report_filter)},
    operation_id="exportGradings",
    summary="Every grading in the filter as JSONL, CSV or SREGym's CSV",
    description=(
        "Written whole before the answer starts: a failure is a 500 problem, and a 200 "
        "carries Content-Length, X-Export-Rows (gradings) and Repr-Digest (SHA-256). "
        "With format=sregym and layout=file or layout=folder, the imported SREGym rows "
        "come back as SREGym wrote them (one row per attempt, every original column; "
        "only the verdict columns of a regraded or overridden attempt change): one CSV "
        "with a last column sregym_file, or the results folder as an archive "
        "(archive=tar.gz or zip); X-Export-Rows then counts attempts."
    ),
    tags=["exports"],
    response_headers=[
        ResponseHeader(
            name="X-Export-Rows", description="gradings in the export", documentation_only=True
        ),
        ResponseHeader(
            name="Repr-Digest",
            description="RFC 9530: sha-256=:BASE64: of the body",
            documentation_only=True,
        ),
    ],
)
async def export_gradings(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    format: FromQuery[Literal["jsonl", "csv", "sregym"]] = "jsonl",
    layout: FromQuery[Literal["file", "folder"] | None] = None,
    archive: FromQuery[SregymArchive | None] = None,
    include_superseded: Annotated[
        bool,
        QueryParameter(
            description="also the gradings a regrade replaced (default: current ones only)"
        ),
    ] = False,
) -> Stream:
    """Every grading of the filter, oldest first, from one snapshot."""
    filters = replace(filters, superseded=include_superseded)
    if layout is not None and format != "sregym":
        raise ApiProblem(422, "Invalid request", "layout: only with format=sregym", field="layout")
    if archive is not None:  # an archive is the results folder, as on the command line
        if format != "sregym" or layout == "file":
            raise ApiProblem(
                422,
                "Invalid request",
                "archive: only with format=sregym, as the results folder (layout=folder)",
                field="archive",
            )
        layout = "folder"
    archive = archive or "tar.gz"
    store, current = services.store, services.rubrics.current
    sink = spool()
    try:
        if layout == "folder":
            summary = await write_sregym_archive(store, filters, sink, archive, current=current)
            media, name = ARCHIVE_MEDIA_TYPES[archive], f"sregym-results.{archive}"
        elif layout == "file":
            summary = await write_sregym_file(store, filters, sink, current=current)
            media, name = "text/csv", "sregym-results.csv"
        else:
            summary = await write_export(store, filters, format, sink, current=current)
            suffix = "jsonl" if format == "jsonl" else "csv"
            media, name = MEDIA_TYPES[format], f"gradings-{format}.{suffix}"
    except ExportFailed as exc:
        sink.close()
        _log.error("export failed: %s", exc, exc_info=exc.cause)
        raise ApiProblem(
            500,
            "Export failed",
            f"the export failed after {exc.rows} gradings ({type(exc.cause).__name__}); "
            "nothing was sent: retry, or see the server's log",
        ) from exc
    return Stream(
        read_chunks(sink),
        media_type=media,
        headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "Content-Length": str(summary.size),
            "Repr-Digest": summary.repr_digest,
            "X-Export-Rows": str(summary.rows),
        },
    )
