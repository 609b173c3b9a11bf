"""Writing an export whole before anyone may take it for complete (issue 19, item 8).

An export is written to a sink in full, counting its gradings and hashing its bytes;
only then does a caller hand it over: the HTTP route answers 200 with the length, the
row count and the SHA-256 (``Content-Length``, ``X-Export-Rows``, ``Repr-Digest``), the
CLI renames its temporary file into place. A failure while reading raises
:class:`ExportFailed`, saying how far it got, before a byte has left: so an export is
either complete and verifiable or an error, never a short file behind a success.

The sink for HTTP is :func:`spool`: memory up to :data:`SPOOL_MEMORY_BYTES`, then an
unnamed temporary file (``TMPDIR``), removed when closed.
"""

from __future__ import annotations

import base64
import hashlib
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import IO

from api.reports.export_reads import ExportedGrading, ExportReads
from api.reports.exports import ExportFormat, export_chunks
from api.reports.filters import ReportFilter
from storage import Store

__all__ = [
    "SPOOL_MEMORY_BYTES",
    "ExportFailed",
    "ExportSummary",
    "read_chunks",
    "spool",
    "write_export",
]

#: bytes of an export kept in memory before the spool moves to a temporary file
SPOOL_MEMORY_BYTES = 8 * 1024 * 1024
#: bytes read from a spool per chunk sent
READ_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class ExportSummary:
    """What a complete export holds: gradings, bytes and the SHA-256 of those bytes."""

    rows: int
    size: int
    sha256: bytes

    @property
    def sha256_hex(self) -> str:
        """The digest in hex, as ``sha256sum`` prints it."""
        return self.sha256.hex()

    @property
    def repr_digest(self) -> str:
        """The digest as an RFC 9530 ``Repr-Digest`` field value."""
        return f"sha-256=:{base64.b64encode(self.sha256).decode('ascii')}:"


class ExportFailed(Exception):
    """Reading or writing an export failed after ``rows`` gradings, because of ``cause``."""

    def __init__(self, rows: int, cause: Exception) -> None:
        """Failed after ``rows`` gradings were read, because of ``cause``."""
        self.rows = rows
        self.cause = cause
        super().__init__(f"the export failed after {rows} gradings ({self.reason})")

    @property
    def reason(self) -> str:
        """The cause as ``Type: message``; of a database error, the driver's own error."""
        orig = getattr(self.cause, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's
        shown = orig if isinstance(orig, BaseException) else self.cause
        return f"{type(shown).__name__}: {shown}"


class _Counter:
    """Counts the gradings an export reads."""

    def __init__(self) -> None:
        self.rows = 0

    async def count(
        self, gradings: AsyncIterator[ExportedGrading]
    ) -> AsyncIterator[ExportedGrading]:
        async for item in gradings:
            self.rows += 1
            yield item


async def write_export(
    store: Store, filters: ReportFilter, fmt: ExportFormat, sink: IO[bytes]
) -> ExportSummary:
    """Write every grading of ``filters`` to ``sink`` as UTF-8, from one snapshot.

    Its summary, or :class:`ExportFailed` for any failure on the way (what ``sink`` then
    holds is a fragment, for the caller to discard).
    """
    counter = _Counter()
    digest = hashlib.sha256()
    size = 0
    try:
        async with ExportReads(store.db).open(filters) as export:
            counted = replace(export, gradings=counter.count(export.gradings))
            async for chunk in export_chunks(counted, fmt):
                data = chunk.encode("utf-8")
                digest.update(data)
                sink.write(data)
                size += len(data)
        sink.flush()
    except Exception as exc:
        raise ExportFailed(counter.rows, exc) from exc
    return ExportSummary(rows=counter.rows, size=size, sha256=digest.digest())


def spool() -> IO[bytes]:
    """A sink in memory up to :data:`SPOOL_MEMORY_BYTES`, then in an unnamed temporary file."""
    return tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES, mode="w+b")


async def read_chunks(source: IO[bytes]) -> AsyncIterator[bytes]:
    """``source`` from its start in chunks; closed at the end, or when the reader stops."""
    try:
        source.seek(0)
        while chunk := source.read(READ_CHUNK_BYTES):
            yield chunk
    finally:
        source.close()
