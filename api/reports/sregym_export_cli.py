"""``sre-judge export --format sregym --layout file|folder [--archive]``: SREGym rows back.

``folder`` writes SREGym's results folder (``<datetime>/<agent>/<problem_id>/...csv``)
under ``--output DIR``: into a temporary folder beside it, renamed into place when
whole, so DIR is the complete export or absent. ``--archive tar.gz|zip`` writes that
folder as one archive instead, and ``file`` one CSV (``--output`` or stdout), all or
nothing like every export. The rows come from the database (:class:`LocalLayout`) or
from ``GET /v1/exports/gradings`` of a server (:class:`RemoteLayout`); with a server, a
folder is fetched as a tar.gz into a temporary file and unpacked with the import's checks
of names and types.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

import click

from api.cli.edge import with_store

if TYPE_CHECKING:
    from api.reports.filters import ReportFilter
    from api.reports.sregym_writer import SregymArchive
    from judge.rubric import Rubric
    from storage import Store

__all__ = [
    "LayoutSource",
    "LocalLayout",
    "RemoteLayout",
    "export_sregym_layout",
]


#: no bound on what the server's own export unpacks to (:meth:`RemoteLayout.folder`)
_UNBOUNDED = sys.maxsize


class LayoutSource(Protocol):
    """Where the SREGym rows come from; each method returns the attempts written."""

    def file(self, sink: IO[bytes]) -> int:
        """One CSV into ``sink``."""

    def archive(self, sink: IO[bytes], kind: SregymArchive) -> int:
        """The folder as a ``kind`` archive into ``sink``."""

    def folder(self, target: Path) -> int:
        """The folder's files under ``target`` (an empty folder)."""


@dataclass(frozen=True)
class LocalLayout:
    """The rows of the database of ``SRE_JUDGE_DATABASE_URL``; ``current``: the rubric
    files' current versions by id (``write_sregym_file``)."""

    report_filter: ReportFilter
    current: Mapping[str, Rubric]

    def file(self, sink: IO[bytes]) -> int:
        """One CSV into ``sink``."""
        from api.reports.sregym_writer import write_sregym_file

        async def work(store: Store) -> int:
            written = await write_sregym_file(store, self.report_filter, sink, current=self.current)
            return written.rows

        return with_store(work)

    def archive(self, sink: IO[bytes], kind: SregymArchive) -> int:
        """The folder as a ``kind`` archive into ``sink``."""
        from api.reports.sregym_writer import write_sregym_archive

        async def work(store: Store) -> int:
            written = await write_sregym_archive(
                store, self.report_filter, sink, kind, current=self.current
            )
            return written.rows

        return with_store(work)

    def folder(self, target: Path) -> int:
        """The folder's files under ``target``."""
        from api.reports.sregym_writer import write_sregym_folder

        async def work(store: Store) -> int:
            return await write_sregym_folder(
                store, self.report_filter, target, current=self.current
            )

        return with_store(work)


@dataclass(frozen=True)
class RemoteLayout:
    """The rows of the server at ``server``; ``params`` its filter as query parameters."""

    server: str
    params: dict[str, str]

    def _get(self, sink: IO[bytes], **layout: str) -> int:
        from api.reports.export_download import download_export

        params = {**self.params, "format": "sregym", **layout}
        return download_export(self.server, params, sink)[0]

    def file(self, sink: IO[bytes]) -> int:
        """One CSV into ``sink``."""
        return self._get(sink, layout="file")

    def archive(self, sink: IO[bytes], kind: SregymArchive) -> int:
        """The folder as a ``kind`` archive into ``sink``."""
        return self._get(sink, layout="folder", archive=kind)

    def folder(self, target: Path) -> int:
        """The folder as a tar.gz, downloaded into an unnamed temporary file beside
        ``target`` (on the disk the export goes to; never held in memory) and unpacked
        under ``target`` with the import's checks of names and types.

        The import's bounds on size and entries are not applied: the archive is the
        server's own export (its SHA-256 checked), as large as the database mode's folder
        or ``--archive`` would be, and neither of those is bounded."""
        from api.sregym_archive import UnsafeArchive, unpack_archive

        with tempfile.TemporaryFile(dir=target.parent, prefix=f"{target.name}.") as fetched:
            rows = self.archive(fetched, "tar.gz")
            try:
                unpack_archive(fetched, "tar.gz", target, limit=_UNBOUNDED, members=_UNBOUNDED)
            except UnsafeArchive as exc:
                raise click.ClickException(
                    f"{self.server} sent an unusable archive: {exc}"
                ) from None
        return rows


def _folder(output: Path, source: LayoutSource) -> int:
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise click.UsageError(f"--output: {output} exists and is not an empty folder")
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.", suffix=".part"))
    try:
        rows = source.folder(staging)
        if output.exists():
            output.rmdir()
        staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return rows


def _one_file(output: Path | None, write: Callable[[IO[bytes]], int]) -> int:
    from api.cli.atomic import replace_atomically
    from api.reports.export_writer import spool

    if output is not None:
        with replace_atomically(output) as file:
            return write(file)
    with spool() as spooled:
        rows = write(spooled)
        spooled.seek(0)
        shutil.copyfileobj(spooled, sys.stdout.buffer)
    return rows


def export_sregym_layout(
    layout: str, archive: SregymArchive | None, output: Path | None, source: LayoutSource
) -> None:
    """Write the export; stderr says how many attempts, exit 1 if it failed."""
    from api.reports.export_writer import ExportFailed

    if layout == "folder" and archive is None and output is None:
        raise click.UsageError("--layout folder needs --output DIR (or --archive tar.gz|zip)")
    where = f" to {output}" if output else ""
    try:
        if layout == "folder" and archive is None:
            rows = _folder(output, source)  # type: ignore[arg-type]
        elif archive is not None:
            rows = _one_file(output, lambda sink: source.archive(sink, archive))
        else:
            rows = _one_file(output, source.file)
    except ExportFailed as exc:
        raise click.ClickException(
            f"export failed after {exc.rows} attempts ({exc.reason}); nothing was written"
        ) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the export{where}: {exc}") from None
    click.echo(f"{rows} SREGym attempts exported{where}", err=True)
