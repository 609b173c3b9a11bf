"""``sre-judge import``: SREGym results folders and JSON lines of historic submissions.

Problems are printed on stderr, one a line, naming the file and line. Exit status: 0
everything imported, 1 some rows were skipped (or, with ``--strict``, nothing was
imported), 2 bad usage.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.edge import run, service_runtime

if TYPE_CHECKING:  # the commands import storage when they run, keeping --help fast
    from storage.imports import ImportReport

__all__ = ["import_group"]


def _report(report: ImportReport, *, as_json: bool, prefix: str = "") -> None:
    for problem in report.problems:
        click.echo(f"{prefix}{problem}", err=True)
    if as_json:
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
    """Import historic runs."""


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
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
def import_sregym(
    directory: Path, problems_file: Path, rubric_id: str | None, as_json: bool
) -> None:
    """Import an SREGym results folder; SREGym's verdicts are kept as gradings by ``sregym``."""
    from api.service.imports import import_sregym_folder
    from storage.imports import ImportFileError, read_problems

    try:
        problems = read_problems(problems_file)
    except ImportFileError as exc:
        raise click.UsageError(str(exc)) from None

    async def action() -> ImportReport:
        async with service_runtime() as services:
            return await import_sregym_folder(services, directory, problems, rubric=rubric_id)

    _report(run(action()), as_json=as_json, prefix=f"{directory}/")


@import_group.command("jsonl")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--strict", is_flag=True, help="import nothing if any line is bad")
@click.option("--rubric", "rubric_id", help="rubric to grade them with (default: the service's)")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
def import_jsonl(file: Path, strict: bool, rubric_id: str | None, as_json: bool) -> None:
    """Import historic submissions, one JSON object a line, queued for grading."""
    from api.service.imports import import_jsonl_file
    from storage.imports import ImportAborted, ImportProblem

    async def action() -> ImportReport:
        async with service_runtime() as services:
            return await import_jsonl_file(services, file, rubric=rubric_id, strict=strict)

    try:
        report = run(action())
    except ImportAborted as aborted:
        for problem in aborted.problems:
            click.echo(f"{file} {problem}", err=True)
        click.echo(f"--strict: {len(aborted.problems)} problems; nothing imported", err=True)
        sys.exit(1)
    report.problems = [ImportProblem(f"{file} {p.where}", p.message) for p in report.problems]
    _report(report, as_json=as_json)
