"""``sre-judge import``: SREGym results folders and JSON lines of historic submissions.

Problems are printed on stderr, one a line, naming the file and line. Exit status: 0
everything imported, 1 some rows were skipped (or, with ``--strict``, nothing was
imported), 2 bad usage.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.edge import CommandError, run, service_runtime
from api.cli.options import format_option, server_option

if TYPE_CHECKING:  # the commands import storage when they run, keeping --help fast
    from storage.imports import ImportReport

__all__ = ["import_group"]


def _no_server(server: str | None) -> None:
    if server is not None:
        raise CommandError(
            "import sregym with --server is not supported yet: upload the folder as a "
            "tar.gz with POST /v1/imports"
        )


def _remote_jsonl(server: str, file: Path, rubric_id: str | None, fmt: str) -> None:
    """``POST /v1/imports`` (JSON lines), then follow the job until it ends."""
    import time

    from api.cli.remote import remote

    body = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    params = {"rubric": rubric_id} if rubric_id else None
    headers = {"Content-Type": "application/x-ndjson"}
    with remote(server) as client:
        answer = client.send("POST", "/v1/imports", content=body, params=params, headers=headers)
        job = answer.json()
        while job["state"] not in ("done", "failed"):
            time.sleep(0.5)
            job = client.get_json(f"/v1/imports/{job['id']}")
    for error in job.get("errors") or []:
        click.echo(f"{file} {error}", err=True)
    if fmt == "json":
        click.echo(json.dumps(job, indent=2))
    else:
        click.echo(f"import job {job['id']}: {job['state']}; {json.dumps(job['report'])}")
    if job["state"] == "failed" or job.get("errors"):
        sys.exit(1)


@contextlib.contextmanager
def _local_file(file: Path) -> Iterator[Path]:
    """``file`` itself, or for ``-`` a temporary copy of stdin (removed afterwards)."""
    if str(file) != "-":
        yield file
        return
    with tempfile.NamedTemporaryFile(prefix="sre-judge-stdin-", suffix=".jsonl") as copy:
        shutil.copyfileobj(sys.stdin.buffer, copy)
        copy.flush()
        yield Path(copy.name)


def _report(report: ImportReport, *, fmt: str, prefix: str = "") -> None:
    for problem in report.problems:
        click.echo(f"{prefix}{problem}", err=True)
    if fmt == "json":
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(report.not_graded.items()))
        click.echo(
            f"imported {report.submissions} submissions "
            f"({report.sregym_verdicts} SREGym verdicts kept, {report.queued} queued for grading"
            f"{', not graded: ' + skipped if skipped else ''}); "
            f"{report.already_imported} already imported; {len(report.problems)} problems"
        )
    if report.problems:
        sys.exit(1)


@click.group("import")
def import_group() -> None:
    """Import historic runs.

    \b
    Example:
      sre-judge import jsonl history.jsonl --strict
    """


@import_group.command("sregym")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--problems",
    "problems_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSONL or YAML of {problem_id, root_cause}",
)
@click.option("--rubric", "rubric_id", help="rubric id the SREGym checklist answers (default)")
@format_option("table", "json", legacy_json=True)
@server_option
def import_sregym(
    directory: Path, problems_file: Path, rubric_id: str | None, fmt: str, server: str | None
) -> None:
    """Import an SREGym results folder; SREGym's verdicts are kept as gradings by ``sregym``.

    \b
    Example:
      sre-judge import sregym results/ --problems problems.yaml
    """
    _no_server(server)
    from api.service.imports import import_sregym_folder
    from storage.imports import ImportFileError, read_problems

    try:
        problems = read_problems(problems_file)
    except ImportFileError as exc:
        raise click.UsageError(str(exc)) from None

    async def action() -> ImportReport:
        async with service_runtime() as services:
            return await import_sregym_folder(services, directory, problems, rubric=rubric_id)

    _report(run(action()), fmt=fmt, prefix=f"{directory}/")


@import_group.command("jsonl")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option("--strict", is_flag=True, help="import nothing if any line is bad")
@click.option("--rubric", "rubric_id", help="rubric to grade them with (default: the service's)")
@format_option("table", "json", legacy_json=True)
@server_option
def import_jsonl(
    file: Path, strict: bool, rubric_id: str | None, fmt: str, server: str | None
) -> None:
    """Import historic submissions, one JSON object a line ('-' for stdin), queued for grading.

    \b
    Example:
      zcat history.jsonl.gz | sre-judge import jsonl - --strict
    """
    if server is not None:
        if strict:
            raise CommandError("--strict with --server is not supported yet")
        return _remote_jsonl(server, file, rubric_id, fmt)
    from api.service.imports import import_jsonl_file
    from storage.imports import ImportAborted, ImportProblem

    async def action(path: Path) -> ImportReport:
        async with service_runtime() as services:
            return await import_jsonl_file(services, path, rubric=rubric_id, strict=strict)

    name = "<stdin>" if str(file) == "-" else file
    try:
        with _local_file(file) as path:
            report = run(action(path))
    except ImportAborted as aborted:
        for problem in aborted.problems:
            click.echo(f"{name} {problem}", err=True)
        click.echo(f"--strict: {len(aborted.problems)} problems; nothing imported", err=True)
        sys.exit(1)
    report.problems = [ImportProblem(f"{name} {p.where}", p.message) for p in report.problems]
    _report(report, fmt=fmt)
