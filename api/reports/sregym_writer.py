"""Writing the lossless SREGym export: one CSV, an archive of the folder, or a folder.

Like :mod:`export_writer`, each writer reads from one snapshot and raises
:class:`ExportFailed` for any failure on the way; the caller hands over (answers 200,
renames into place) only what was written whole. An archive holds SREGym's layout at
its root (``<datetime>/<agent>/<problem_id>/...csv``), as ``POST /v1/imports`` reads it,
each file at the path the import kept, by the upload's rule for an archive's entry, so
the archive (and the folder) can be uploaded again. Each counts the attempts it wrote
(distinct submissions, however many files hold each).
"""

from __future__ import annotations

import csv
import io
import logging
import tarfile
import time
import zipfile
from collections.abc import AsyncIterator, Mapping
from pathlib import Path, PurePosixPath
from typing import IO, Literal

from api.reports.export_writer import ExportFailed, ExportSummary, HashingSink
from api.reports.filters import ReportFilter
from api.reports.sregym_roundtrip import (
    FILE_COLUMN,
    SregymFile,
    csv_text,
    row_cells,
    sregym_files,
)
from api.reports.sregym_row_reads import OriginalRowReads
from api.sregym_archive import UnsafeArchive, entry_path
from judge.rubric import Rubric
from storage import Store

__all__ = [
    "ARCHIVE_MEDIA_TYPES",
    "SregymArchive",
    "write_sregym_archive",
    "write_sregym_file",
    "write_sregym_folder",
]

SregymArchive = Literal["tar.gz", "zip"]
ARCHIVE_MEDIA_TYPES: dict[SregymArchive, str] = {
    "tar.gz": "application/gzip",
    "zip": "application/zip",
}
_log = logging.getLogger(__name__)


async def _placed(
    files: AsyncIterator[SregymFile],
) -> AsyncIterator[tuple[PurePosixPath, SregymFile]]:
    """Each file with its path in the results folder, by the rule an upload checks an
    archive's entry with (:func:`entry_path`), so what is written can be uploaded to
    ``POST /v1/imports`` again; a file whose kept path that rule refuses (a name past
    255 bytes or a path past 1,024, imported from a folder on disk, which holds no such
    limit; or kept by a version that did not check it) is left out and logged, never
    failing the export."""
    async for f in files:
        try:
            path = entry_path(f.path)
        except UnsafeArchive as exc:
            _log.warning("SREGym export: a file left out, its path is refused: %s", exc)
            continue
        yield path, f


async def write_sregym_file(
    store: Store, filters: ReportFilter, sink: IO[bytes], *, current: Mapping[str, Rubric]
) -> ExportSummary:
    """Every imported row of ``filters`` in one CSV, the file each came from last
    (``current``: the rubric files' current versions by id, as ``write_export`` takes
    them); the summary counts attempts (an attempt SREGym wrote in three files is one)."""
    out, attempts = HashingSink(sink), set[str]()
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
                attempts.add(row.original.submission_id)
            out.write(text.getvalue().encode("utf-8"))  # the header of an empty export
        out.flush()
    except Exception as exc:
        raise ExportFailed(len(attempts), exc) from exc
    return out.summary(len(attempts))


async def write_sregym_archive(
    store: Store,
    filters: ReportFilter,
    sink: IO[bytes],
    archive: SregymArchive,
    *,
    current: Mapping[str, Rubric],
) -> ExportSummary:
    """Every imported row of ``filters`` in SREGym's folder layout, as tar.gz or zip
    (``current``: as :func:`write_sregym_file` takes it); the summary counts attempts."""
    out, attempts, now = HashingSink(sink), set[str](), time.time()
    try:
        async with OriginalRowReads(store.db, current).open(filters) as export:
            files = _placed(sregym_files(export.rows, export.rubrics))
            if archive == "zip":
                with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zipped:  # type: ignore[call-overload]
                    async for path, f in files:
                        zipped.writestr(str(path), csv_text(f.columns, f.rows))
                        attempts.update(f.attempts)
            else:
                with tarfile.open(fileobj=out, mode="w:gz") as tar:  # type: ignore[call-overload]
                    async for path, f in files:
                        data = csv_text(f.columns, f.rows).encode("utf-8")
                        info = tarfile.TarInfo(str(path))
                        info.size, info.mtime, info.mode = len(data), int(now), 0o644
                        tar.addfile(info, io.BytesIO(data))
                        attempts.update(f.attempts)
        out.flush()
    except Exception as exc:
        raise ExportFailed(len(attempts), exc) from exc
    return out.summary(len(attempts))


async def write_sregym_folder(
    store: Store, filters: ReportFilter, folder: Path, *, current: Mapping[str, Rubric]
) -> int:
    """Every imported row of ``filters`` as SREGym's files under ``folder``; the attempts
    written (``current``: as :func:`write_sregym_file` takes it)."""
    attempts = set[str]()
    try:
        async with OriginalRowReads(store.db, current).open(filters) as export:
            async for path, f in _placed(sregym_files(export.rows, export.rubrics)):
                target = folder.joinpath(*path.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                with target.open("w", newline="", encoding="utf-8") as handle:
                    handle.write(csv_text(f.columns, f.rows))
                attempts.update(f.attempts)
    except Exception as exc:
        raise ExportFailed(len(attempts), exc) from exc
    return len(attempts)
