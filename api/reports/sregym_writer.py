"""Writing the lossless SREGym export: one CSV, an archive of the folder, or a folder.

Like :mod:`export_writer`, each writer reads from one snapshot and raises
:class:`ExportFailed` for any failure on the way; the caller hands over (answers 200,
renames into place) only what was written whole. An archive holds SREGym's layout at
its root (``<datetime>/<agent>/<problem_id>/...csv``), as ``POST /v1/imports`` reads it.
"""

from __future__ import annotations

import csv
import io
import tarfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from api.reports.export_writer import ExportFailed, ExportSummary, HashingSink
from api.reports.filters import ReportFilter
from api.reports.sregym_roundtrip import (
    FILE_COLUMN,
    csv_text,
    row_cells,
    sregym_files,
)
from api.reports.sregym_row_reads import OriginalRowReads
from judge.rubric import Rubric
from storage import Store

__all__ = [
    "ARCHIVE_MEDIA_TYPES",
    "SregymArchive",
    "safe_relative",
    "write_sregym_archive",
    "write_sregym_file",
    "write_sregym_folder",
]

SregymArchive = Literal["tar.gz", "zip"]
ARCHIVE_MEDIA_TYPES: dict[SregymArchive, str] = {
    "tar.gz": "application/gzip",
    "zip": "application/zip",
}


def safe_relative(path: str) -> PurePosixPath:
    """``path`` as a relative path inside a folder; ValueError if it could leave it."""
    pure = PurePosixPath(path)
    if pure.is_absolute() or not pure.parts or any(p in ("", ".", "..") for p in pure.parts):
        raise ValueError(f"{path!r} is not a relative path inside the results folder")
    if "\\" in path or ":" in pure.parts[0]:
        raise ValueError(f"{path!r} is not a relative path inside the results folder")
    return pure


async def write_sregym_file(
    store: Store, filters: ReportFilter, sink: IO[bytes], *, current: Mapping[str, Rubric]
) -> ExportSummary:
    """Every imported row of ``filters`` in one CSV, the file each came from last
    (``current``: the rubric files' current versions by id, as ``write_export`` takes them)."""
    out, rows = HashingSink(sink), 0
    try:
        async with OriginalRowReads(store.db, current).open(filters) as export:
            columns = [*export.columns, FILE_COLUMN]
            # one writer for the whole stream: a header cell may hold a line break, so a
            # row is never cut out of text written with the header
            text = io.StringIO()
            writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore")
            writer.writeheader()
            async for row in export.rows:
                writer.writerow({**row_cells(row, export.rubrics), FILE_COLUMN: row.original.path})
                out.write(text.getvalue().encode("utf-8"))
                text.seek(0)
                text.truncate()
                rows += 1
            out.write(text.getvalue().encode("utf-8"))  # the header of an empty export
        out.flush()
    except Exception as exc:
        raise ExportFailed(rows, exc) from exc
    return out.summary(rows)


async def write_sregym_archive(
    store: Store,
    filters: ReportFilter,
    sink: IO[bytes],
    archive: SregymArchive,
    *,
    current: Mapping[str, Rubric],
) -> ExportSummary:
    """Every imported row of ``filters`` in SREGym's folder layout, as tar.gz or zip
    (``current``: as :func:`write_sregym_file` takes it)."""
    out, rows, now = HashingSink(sink), 0, time.time()
    try:
        async with OriginalRowReads(store.db, current).open(filters) as export:
            if archive == "zip":
                with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zipped:  # type: ignore[call-overload]
                    async for f in sregym_files(export.rows, export.rubrics):
                        zipped.writestr(str(safe_relative(f.path)), csv_text(f.columns, f.rows))
                        rows += len(f.rows)
            else:
                with tarfile.open(fileobj=out, mode="w:gz") as tar:  # type: ignore[call-overload]
                    async for f in sregym_files(export.rows, export.rubrics):
                        data = csv_text(f.columns, f.rows).encode("utf-8")
                        info = tarfile.TarInfo(str(safe_relative(f.path)))
                        info.size, info.mtime, info.mode = len(data), int(now), 0o644
                        tar.addfile(info, io.BytesIO(data))
                        rows += len(f.rows)
        out.flush()
    except Exception as exc:
        raise ExportFailed(rows, exc) from exc
    return out.summary(rows)


async def write_sregym_folder(
    store: Store, filters: ReportFilter, folder: Path, *, current: Mapping[str, Rubric]
) -> int:
    """Every imported row of ``filters`` as SREGym's files under ``folder``; the rows
    written (``current``: as :func:`write_sregym_file` takes it)."""
    rows = 0
    try:
        async with OriginalRowReads(store.db, current).open(filters) as export:
            async for f in sregym_files(export.rows, export.rubrics):
                target = folder.joinpath(*safe_relative(f.path).parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("w", newline="", encoding="utf-8") as handle:
                    handle.write(csv_text(f.columns, f.rows))
                rows += len(f.rows)
    except Exception as exc:
        raise ExportFailed(rows, exc) from exc
    return rows
