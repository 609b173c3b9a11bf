"""``sre-judge import``: SREGym results folders and JSON lines of historic submissions.

Problems are printed on stderr, one a line, naming the file and line. Exit status: 0
everything imported, 1 some rows were skipped (or, with ``--strict``, nothing was
imported, or a server's import job failed), 2 bad usage. With ``--server URL`` the
input is uploaded to ``POST /v1/imports`` and the job followed to its end
(:mod:`api.imports.remote`); the output is the same as the database mode's.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from api.cli.edge import run, service_runtime
from api.cli.options import format_option, server_option
from api.terminal import terminal_text

if TYPE_CHECKING:  # the commands import storage when they run, keeping --help fast
    from api.imports.problems import ImportProblem
    from api.imports.report import ImportReport

__all__ = ["import_group"]


def _remote(server: str, body: bytes, media_type: str, params: dict[str, str]) -> ImportReport:
    """The report of the import job the upload started; exit 1 if the job failed."""
    from api.imports.remote import upload_and_follow

    finished = upload_and_follow(server, body, media_type, params)
    if finished.state == "failed":
        raise _Failed(finished.error or "no reason given", finished.report, finished.problems)
    return finished.report


class _Failed(Exception):
    """A server's import job that failed: why, the rows it lists and how many it refused."""

    def __init__(self, error: str, report: ImportReport, problems: int) -> None:
        super().__init__(error)
        self.report = report
        self.problems = problems


def _failed(failed: _Failed, prefix: str) -> NoReturn:
    """Exit 1 naming why the server's import job failed (and the rows it refused)."""
    for problem in failed.report.problems:
        click.echo(terminal_text(f"{prefix}{problem}", one_line=True), err=True)
    click.echo(terminal_text(f"the import job failed: {failed}", one_line=True), err=True)
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
        click.echo(terminal_text(f"{prefix}{problem}", one_line=True), err=True)
    for conflict in report.conflicts:
        click.echo(terminal_text(f"{prefix}conflict: {conflict}", one_line=True), err=True)
    if fmt == "json":
        click.echo(json.dumps(report.as_dict(), indent=2))
    else:
        skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(report.not_graded.items()))
        click.echo(
            f"imported {report.submissions} submissions "
            f"({report.sregym_verdicts} SREGym verdicts kept, {report.queued} queued for grading"
            f"{', not graded: ' + skipped if skipped else ''}); "
            f"{report.already_imported} already imported; "
            f"{report.graded_here} graded here already; {report.problem_count} problems; "
            f"{report.conflict_count} conflicts"
        )
    if report.problems or report.conflicts:
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
    With --server URL the folder is uploaded to the server as a tar.gz (with the
    problems as problems.jsonl) and the import job followed until it ends.

    \b
    Example:
      sre-judge import sregym results/ --problems problems.yaml
      sre-judge import sregym results/ --problems problems.yaml --server https://judge.example.com
    """
    from api.cli.edge import load_settings
    from api.imports.problems import ImportFileError, read_problems

    max_bytes = load_settings().max_text_bytes
    try:
        problems = read_problems(problems_file, max_bytes=max_bytes)
    except ImportFileError as exc:
        raise click.UsageError(str(exc)) from None
    prefix = f"{directory}/"
    if server is not None:
        from api.cli.remote import server_and_token
        from api.imports.remote import sregym_archive

        server_and_token(server)  # a bad --server is refused with nothing to upload too
        upload = sregym_archive(directory, problems, max_bytes=max_bytes)
        if not upload.files:  # no file to send (none, or every one refused here)
            return _report(upload.report(None), fmt=fmt, prefix=prefix)
        params = {"rubric": rubric_id} if rubric_id is not None else {}
        try:
            report = _remote(server, upload.body, "application/gzip", params)
        except _Failed as failed:
            failed.report = upload.report(failed.report)
            _failed(failed, prefix)
        return _report(upload.report(report), fmt=fmt, prefix=prefix)

    from api.imports.use_cases import import_sregym_folder

    async def action() -> ImportReport:
        async with service_runtime() as services:
            return await import_sregym_folder(
                services, directory, problems, rubric=rubric_id, actor="cli"
            )

    _report(run(action()), fmt=fmt, prefix=prefix)


@import_group.command("jsonl")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option("--strict", is_flag=True, help="import nothing if any line is bad or in conflict")
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
    from api.imports.report import ImportAborted

    name = "<stdin>" if str(file) == "-" else str(file)
    try:
        if server is not None:
            report = _remote_jsonl(server, file, rubric_id, strict)
        else:
            with _local_file(file) as path:
                report = run(_local_jsonl(path, rubric_id, strict))
    except ImportAborted as aborted:
        for problem in [*aborted.problems, *aborted.conflicts]:
            click.echo(terminal_text(f"{name} {problem}", one_line=True), err=True)
        click.echo(f"--strict: {aborted.count} problems; nothing imported", err=True)
        sys.exit(1)
    except _Failed as failed:
        _failed(failed, f"{name} ")
    report.problems = [_named(name, p) for p in report.problems]
    report.conflicts = [_named(name, p) for p in report.conflicts]
    _report(report, fmt=fmt)


def _named(name: str, problem: ImportProblem) -> ImportProblem:
    """``problem`` with the file's name before its line."""
    from api.imports.problems import ImportProblem

    return ImportProblem(f"{name} {problem.where}", problem.message, problem.field)


async def _local_jsonl(path: Path, rubric_id: str | None, strict: bool) -> ImportReport:
    from api.imports.use_cases import import_jsonl_file

    async with service_runtime() as services:
        return await import_jsonl_file(services, path, rubric=rubric_id, strict=strict, actor="cli")


def _remote_jsonl(server: str, file: Path, rubric_id: str | None, strict: bool) -> ImportReport:
    """``POST /v1/imports`` (JSON lines); a strict job that failed on bad lines aborts.
    A bad ``server`` is refused first, with nothing to upload too."""
    from api.cli.remote import server_and_token
    from api.imports.report import ImportAborted

    server_and_token(server)
    body = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    if not body.strip():  # no line: nothing to send, as the database mode imports none
        from api.imports.report import ImportReport

        return ImportReport()
    params = {"rubric": rubric_id} if rubric_id is not None else {}
    if strict:
        params["strict"] = "true"
    try:
        return _remote(server, body, "application/x-ndjson", params)
    except _Failed as failed:
        if strict and (failed.report.problems or failed.report.conflicts):
            report = failed.report
            count = failed.problems + report.conflict_count
            raise ImportAborted(report.problems, conflicts=report.conflicts, count=count) from None
        raise
