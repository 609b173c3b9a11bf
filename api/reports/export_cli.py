"""``sre-judge export``: every grading in the filter, from the database or a server.

All or nothing: the export is written whole before anyone can read it (a temporary file
beside ``--output``, renamed into place; for stdout, spooled first).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import with_store
from api.cli.options import filter_options, server_option
from api.reports.cli import REPORT_ALIASES, current_rubrics
from api.reports.cli_options import build_filter

if TYPE_CHECKING:
    from api.reports.export_writer import ExportSummary
    from api.reports.exports import ExportFormat
    from api.reports.sregym_writer import SregymArchive
    from storage import Store

__all__ = ["export_command"]


def _local(fmt: ExportFormat, output: Path | None, filters: Any) -> tuple[int, str]:
    """Gradings exported and the SHA-256 of the bytes, read from the database."""
    from api.cli.atomic import replace_atomically
    from api.reports.export_writer import ExportFailed, spool, write_export

    current = current_rubrics()

    async def work(store: Store) -> ExportSummary:
        if output is not None:
            with replace_atomically(output) as file:
                return await write_export(store, filters, fmt, file, current=current)
        with spool() as spooled:
            summary = await write_export(store, filters, fmt, spooled, current=current)
            spooled.seek(0)
            shutil.copyfileobj(spooled, sys.stdout.buffer)
        return summary

    try:
        summary = with_store(work)
    except ExportFailed as exc:
        kept = f"{output} is unchanged" if output else "nothing was written"
        raise click.ClickException(
            f"export failed after {exc.rows} gradings ({exc.reason}); {kept}"
        ) from None
    return summary.rows, summary.sha256_hex


def _remote(
    server: str, fmt: ExportFormat, output: Path | None, params: dict[str, str]
) -> tuple[int, str]:
    """The same export through ``GET /v1/exports/gradings`` (the server writes it whole),
    streamed into the output file (or a spool, then stdout): never held in memory, and
    kept only when it is the export the server states (:func:`download_export`)."""
    from api.cli.atomic import replace_atomically
    from api.reports.export_download import download_export
    from api.reports.export_writer import spool

    query = {**params, "format": fmt}
    if output is not None:
        with replace_atomically(output) as file:
            return download_export(server, query, file)
    with spool() as spooled:
        done = download_export(server, query, spooled)
        spooled.seek(0)
        shutil.copyfileobj(spooled, sys.stdout.buffer)
    return done


def _layout(
    fmt: ExportFormat,
    layout: str | None,
    archive: SregymArchive | None,
    output: Path | None,
    server: str | None,
    include_superseded: bool,
    filters: dict[str, Any],
) -> None:
    """``--layout file|folder`` and ``--archive``: SREGym's own rows and folders."""
    from api.reports.sregym_export_cli import (
        LayoutSource,
        LocalLayout,
        RemoteLayout,
        export_sregym_layout,
    )

    if fmt != "sregym":
        raise click.UsageError("--layout and --archive are only for --format sregym")
    if archive is not None and layout == "file":
        raise click.UsageError("--archive is only for --layout folder")
    source: LayoutSource
    if server is not None:
        source = RemoteLayout(server, _params(filters, include_superseded))
    else:
        report_filter = replace(build_filter(**filters), superseded=include_superseded)
        source = LocalLayout(report_filter, current_rubrics())
    export_sregym_layout(layout or "folder", archive, output, source)


def _params(filters: dict[str, Any], include_superseded: bool) -> dict[str, str]:
    """The filter flags as ``GET /v1/exports/gradings`` takes them."""
    from api.cli.remote import query_params

    params = query_params(filters)
    if include_superseded:
        params["include_superseded"] = "true"
    return params


@click.command("export")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv", "sregym"]), required=True)
@click.option(
    "--output",
    "-o",
    type=click.Path(allow_dash=True, path_type=Path),
    help="write to this file ('-' or none: stdout); with --layout folder, this folder",
)
@click.option(
    "--layout",
    type=click.Choice(["file", "folder"]),
    help="with --format sregym: imported SREGym rows as SREGym wrote them, one CSV or its folder",
)
@click.option(
    "--archive",
    type=click.Choice(["tar.gz", "zip"]),
    help="with --layout folder: the folder as one archive (to --output FILE or stdout)",
)
@click.option("--include-superseded", is_flag=True, help="also gradings replaced by a regrade")
@filter_options(aliases=REPORT_ALIASES, scope=True)
@server_option
def export_command(
    fmt: ExportFormat,
    output: Path | None,
    layout: str | None,
    archive: SregymArchive | None,
    include_superseded: bool,
    server: str | None,
    filters: dict[str, Any],
) -> None:
    """Every grading in the filter as JSONL, CSV or SREGym's results CSV.

    All or nothing: if the export fails, nothing is written, an existing --output file is
    left as it was, and the exit status is 1. On success, stderr gives the gradings
    exported and the SHA-256 of the bytes. --format sregym --layout folder|file gives
    imported SREGym attempts back as SREGym wrote them (--archive: the folder as one
    tar.gz or zip). With --server URL every option works the same through the server.

    \b
    Example:
      sre-judge export --format jsonl --agent my-agent -o - | gzip > gradings.jsonl.gz
      sre-judge export --format sregym --layout folder -o results/ --server https://judge.example.com
    """
    if output is not None and str(output) == "-":
        output = None
    if layout is not None or archive is not None:
        return _layout(fmt, layout, archive, output, server, include_superseded, filters)
    if output is not None and output.is_dir():
        raise click.UsageError(f"--output: {output} is a folder")
    where = f" to {output}" if output else ""
    try:
        if server is not None:
            rows, digest = _remote(server, fmt, output, _params(filters, include_superseded))
        else:
            report_filter = replace(build_filter(**filters), superseded=include_superseded)
            rows, digest = _local(fmt, output, report_filter)
    except OSError as exc:
        raise click.ClickException(f"cannot write the export{where}: {exc}") from None
    click.echo(f"{rows} gradings exported{where} (sha256 {digest})", err=True)
