"""``sre-judge import``: SREGym results folders and JSON lines of historic submissions.

Problems are printed on stderr, one a line, naming the file and line. Exit status: 0
everything imported, 1 some rows were skipped (or, with ``--strict``, nothing was
imported), 2 bad usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from api.service.settings import Settings

if TYPE_CHECKING:  # the commands import storage when they run, keeping --help fast
    from judge.rubric import Rubric
    from storage import Store
    from storage.imports import ImportReport

__all__ = ["import_group"]

T = TypeVar("T")


def _run(settings: Settings, action: Callable[[Store], Awaitable[T]]) -> T:
    from storage import Store, make_engine, upgrade

    async def run() -> T:
        await upgrade(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            return await action(Store(engine))
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _rubric(settings: Settings, rubric_id: str | None) -> Rubric:
    from judge.rubric import load_rubric_dir

    rubrics = load_rubric_dir(settings.rubric_dir)
    name = rubric_id or settings.rubric
    if name not in rubrics:
        raise click.UsageError(f"no rubric {name!r} in {settings.rubric_dir}")
    return rubrics[name]


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
    from storage.imports import ImportFileError, read_problems, read_sregym_folder

    settings = Settings()
    try:
        problems = read_problems(problems_file)
    except ImportFileError as exc:
        raise click.UsageError(str(exc)) from None
    rubric = _rubric(settings, rubric_id)

    async def action(store: Store) -> ImportReport:
        return await store.import_sregym(read_sregym_folder(directory), problems, rubric=rubric)

    _report(_run(settings, action), as_json=as_json, prefix=f"{directory}/")


@import_group.command("jsonl")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--strict", is_flag=True, help="import nothing if any line is bad")
@click.option("--rubric", "rubric_id", help="rubric to grade them with (default: the service's)")
@click.option("--json", "as_json", is_flag=True, help="print the summary as JSON")
def import_jsonl(file: Path, strict: bool, rubric_id: str | None, as_json: bool) -> None:
    """Import historic submissions, one JSON object a line, queued for grading."""
    from judge.spec import parse_judge_spec
    from storage.imports import ImportAborted, ImportProblem, read_jsonl

    settings = Settings()
    rubric = _rubric(settings, rubric_id)
    spec = parse_judge_spec(settings.judge)
    judge = (settings.judge, spec.backend, spec.model)
    lines = read_jsonl(file, max_bytes=settings.max_text_bytes)

    async def action(store: Store) -> ImportReport:
        return await store.import_jsonl(lines, rubric=rubric, judge=judge, strict=strict)

    try:
        report = _run(settings, action)
    except ImportAborted as aborted:
        for problem in aborted.problems:
            click.echo(f"{file} {problem}", err=True)
        click.echo(f"--strict: {len(aborted.problems)} problems; nothing imported", err=True)
        sys.exit(1)
    report.problems = [ImportProblem(f"{file} {p.where}", p.message) for p in report.problems]
    _report(report, as_json=as_json)
