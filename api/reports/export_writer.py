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
import binascii
import hashlib
import tempfile
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import IO

from api.reports.export_reads import ExportedGrading, ExportReads
from api.reports.exports import ExportFormat, export_chunks
from api.reports.filters import ReportFilter
from judge.rubric import Rubric
from storage import Store

__all__ = [
    "SPOOL_MEMORY_BYTES",
    "ExportFailed",
    "ExportSummary",
    "HashingSink",
    "read_chunks",
    "spool",
    "stated_sha256",
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


def stated_sha256(repr_digest: str | None) -> bytes | None:
    """The SHA-256 a ``Repr-Digest`` field value states (``sha-256=:BASE64:``, as
    :attr:`ExportSummary.repr_digest` writes it), else None."""
    for member in (repr_digest or "").split(","):
        name, _, encoded = member.strip().partition("=")
        if name.strip().lower() != "sha-256":
            continue
        encoded = encoded.strip()
        if len(encoded) < 2 or not (encoded.startswith(":") and encoded.endswith(":")):
            return None
        try:
            return base64.b64decode(encoded[1:-1], validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


class HashingSink:
    """A write-only sink that counts and hashes what passes through it to ``sink``."""

    def __init__(self, sink: IO[bytes]) -> None:
        """Pass on to ``sink``."""
        self._sink = sink
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        """Hash and count ``data``, and write it on."""
        self.digest.update(data)
        self.size += len(data)
        return self._sink.write(data)

    def flush(self) -> None:
        """Flush the sink passed on to."""
        self._sink.flush()

    def summary(self, rows: int) -> ExportSummary:
        """What passed through, holding ``rows`` gradings."""
        return ExportSummary(rows=rows, size=self.size, sha256=self.digest.digest())


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
    store: Store,
    filters: ReportFilter,
    fmt: ExportFormat,
    sink: IO[bytes],
    *,
    current: Mapping[str, Rubric],
) -> ExportSummary:
    """Write every grading of ``filters`` to ``sink`` as UTF-8, from one snapshot.

    ``current``: the rubric files' current versions by id, which a grading whose rubric
    version is not stored reads with, as its grading object does (:class:`ExportReads`).
    Its summary, or :class:`ExportFailed` for any failure on the way (what ``sink`` then
    holds is a fragment, for the caller to discard).
    """
    counter = _Counter()
    digest = hashlib.sha256()
    size = 0
    try:
        async with ExportReads(store.db, current).open(filters) as export:
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
