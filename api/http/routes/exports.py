"""Exporting stored gradings over HTTP, streamed: admins only (ground truths included)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from litestar import get
from litestar.di import NamedDependency, Provide
from litestar.params import FromQuery
from litestar.response import Stream

from api.http.auth import require
from api.http.report_params import report_filter
from api.service.reports.exports import MEDIA_TYPES, export_chunks
from api.service.services import Services
from storage.report_queries import ReportFilter

__all__ = ["export_gradings"]


@get(
    "/v1/exports/gradings",
    guards=[require("admin")],
    dependencies={"filters": Provide(report_filter)},
    operation_id="exportGradings",
    summary="Every grading in the filter as JSONL, CSV or SREGym's CSV",
    tags=["exports"],
)
async def export_gradings(
    services: NamedDependency[Services],
    filters: NamedDependency[ReportFilter],
    format: FromQuery[Literal["jsonl", "csv", "sregym"]] = "jsonl",
) -> Stream:
    """Streamed oldest first from one snapshot; nothing is held in memory but one batch."""
    store = services.store

    async def chunks() -> AsyncIterator[str]:
        async with store.exports.open(filters) as export:
            async for chunk in export_chunks(export, format):
                yield chunk

    suffix = "jsonl" if format == "jsonl" else "csv"
    return Stream(
        chunks(),
        media_type=MEDIA_TYPES[format],
        headers={"Content-Disposition": f'attachment; filename="gradings-{format}.{suffix}"'},
    )
