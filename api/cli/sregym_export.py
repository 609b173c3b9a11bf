"""``sre-judge export --format sregym --layout file|folder``: imported SREGym rows back.

``folder`` writes SREGym's results folder (``<datetime>/<agent>/<problem_id>/...csv``)
under ``--output DIR``: into a temporary folder beside it, renamed into place when
whole, so DIR is the complete export or absent. ``file`` writes one CSV (``--output``
or stdout), all or nothing like every export.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.edge import with_store

if TYPE_CHECKING:
    from storage import Store
    from storage.report_queries import ReportFilter

__all__ = ["export_sregym_layout"]


def _folder(output: Path, report_filter: ReportFilter) -> int:
    from api.service.reports.sregym_writer import write_sregym_folder

    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise click.UsageError(f"--output: {output} exists and is not an empty folder")
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=output.parent, prefix=f".{output.name}.", suffix=".part"))
    try:

        async def work(store: Store) -> int:
            return await write_sregym_folder(store, report_filter, staging)

        rows = with_store(work)
        if output.exists():
            output.rmdir()
        staging.rename(output)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return rows


def _file(output: Path | None, report_filter: ReportFilter) -> int:
    from api.cli.atomic import replace_atomically
    from api.service.reports.export_writer import spool
    from api.service.reports.sregym_writer import write_sregym_file

    async def work(store: Store) -> int:
        if output is not None:
            with replace_atomically(output) as file:
                return (await write_sregym_file(store, report_filter, file)).rows
        with spool() as spooled:
            summary = await write_sregym_file(store, report_filter, spooled)
            spooled.seek(0)
            shutil.copyfileobj(spooled, click.get_binary_stream("stdout"))
        return summary.rows

    return with_store(work)


def export_sregym_layout(
    fmt: str, layout: str, output: Path | None, report_filter: ReportFilter
) -> None:
    """Write the export; stderr says how many attempts, exit 1 if it failed."""
    from api.service.reports.export_writer import ExportFailed

    if fmt != "sregym":
        raise click.UsageError("--layout is only for --format sregym")
    if layout == "folder" and output is None:
        raise click.UsageError("--layout folder needs --output DIR")
    where = f" to {output}" if output else ""
    try:
        rows = (
            _folder(output, report_filter)
            if output and layout == "folder"
            else _file(output, report_filter)
        )
    except ExportFailed as exc:
        raise click.ClickException(
            f"export failed after {exc.rows} attempts ({exc.reason}); nothing was written"
        ) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the export{where}: {exc}") from None
    click.echo(f"{rows} SREGym attempts exported{where}", err=True)
