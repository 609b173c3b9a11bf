"""``sre-judge regrade``: start a regrade job, follow it, read what flipped.

``--wait`` grades the job in this process (with the configured number of workers,
beside any server or ``sre-judge worker`` sharing the database) and shows a progress
bar until the job ends. Exit status: 0 done, 1 failed or cancelled, 2 bad usage.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import run, service_runtime

if TYPE_CHECKING:  # the commands import the service when they run, keeping --help fast
    from api.service.regrade.schemas import RegradeFilterIn, RegradeJobPublic
    from api.service.services import Services

__all__ = ["regrade_group"]

_POLL_SECONDS = 0.5
#: states a job does not leave by itself (as ``storage.regrade.tables._ENDED``)
_ENDED = ("done", "failed", "cancelled")


def _show(job: RegradeJobPublic, *, as_json: bool) -> None:
    if as_json:
        click.echo(job.model_dump_json(indent=2))
        return
    estimate = job.estimate
    click.echo(
        f"regrade job {job.id}: {job.state}{' (dry run)' if job.dry_run else ''}, {job.mode}, "
        f"rubric {job.rubric['id']}@{job.rubric['version']}, judge {job.judge}, "
        f"ground truth {job.ground_truth}\n"
        f"  submissions {job.total}; done {job.done}, failed {job.failed}, "
        f"cancelled {job.cancelled}, remaining {job.remaining}\n"
        f"  judge calls {job.judge_calls}, cache hits {job.cache_hits}\n"
        f"  estimate: {estimate.get('judge_calls')} judge calls after "
        f"{estimate.get('cache_hits')} cache hits (cache per {estimate.get('cache_granularity')}), "
        f"~{estimate.get('prompt_tokens')} prompt and ~{estimate.get('completion_tokens')} "
        f"completion tokens"
    )


async def _follow(services: Services, job_id: str) -> RegradeJobPublic:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from api.service.regrade.schemas import job_public

    console = Console(stderr=True)
    columns = (
        TextColumn("regrading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        job = job_public(await services.store.regrade.get_job(job_id))
        task = progress.add_task("job", total=job.total, note="")
        while True:
            finished = job.done + job.failed + job.cancelled
            note = f"failed {job.failed}, cache hits {job.cache_hits}, {job.state}"
            progress.update(task, completed=finished, note=note)
            if job.state in _ENDED:
                return job
            await asyncio.sleep(_POLL_SECONDS)
            job = job_public(await services.store.regrade.get_job(job_id))


def _filter(options: dict[str, Any]) -> RegradeFilterIn:
    from api.service.regrade.schemas import RegradeFilterIn

    passed = options.pop("filter_passed")
    values = {k.removeprefix("filter_"): v for k, v in options.items() if v not in (None, ())}
    if passed is not None:
        values["passed"] = passed == "pass"
    return RegradeFilterIn.model_validate(values)


@click.group("regrade", invoke_without_command=True)
@click.option("--rubric", help="target rubric: id or id@version (default: the service's)")
@click.option("--judge", help="target judge BACKEND:MODEL[@URL] (default: the service's)")
@click.option("--mode", type=click.Choice(["shadow", "promote"]), default="shadow")
@click.option(
    "--ground-truth",
    type=click.Choice(["as_submitted", "latest"]),
    default="as_submitted",
    show_default=True,
    help="grade against each submission's own ground truth, or its scenario's newest version",
)
@click.option("--filter-agent")
@click.option("--filter-model")
@click.option("--filter-scenario", "filter_scenario_id")
@click.option("--filter-after", "filter_created_after", type=click.DateTime(), help="UTC")
@click.option("--filter-before", "filter_created_before", type=click.DateTime(), help="UTC")
@click.option("--filter-rubric-version", help="of the current grading: id@version or version")
@click.option("--filter-judge", help="of the current grading, e.g. external:sregym")
@click.option("--filter-passed", type=click.Choice(["pass", "fail"]))
@click.option("--filter-tag", "filter_tags", multiple=True, help="scenario tag (repeatable)")
@click.option("--filter-scenario-set", help="only scenarios of this set, e.g. held-out")
@click.option("--dry-run", is_flag=True, help="print counts and estimates; grade nothing")
@click.option("--wait", is_flag=True, help="grade here and show progress until the job ends")
@click.option("--json", "as_json", is_flag=True, help="print the job as JSON")
@click.pass_context
def regrade_group(ctx: click.Context, **options: Any) -> None:
    """Start a regrade job (subcommands: status, flips)."""
    if ctx.invoked_subcommand is not None:
        return
    from pydantic import ValidationError

    from api.service.regrade.jobs import start_regrade
    from api.service.regrade.schemas import RegradeJobCreate, job_public

    rubric, judge, mode = options.pop("rubric"), options.pop("judge"), options.pop("mode")
    ground_truth = options.pop("ground_truth")
    dry_run, wait, as_json = options.pop("dry_run"), options.pop("wait"), options.pop("as_json")
    for key in ("filter_created_after", "filter_created_before"):
        if isinstance(options[key], datetime):
            options[key] = options[key].isoformat() + "+00:00"
    try:
        data = RegradeJobCreate(
            filter=_filter(options),
            rubric=rubric,
            judge=judge,
            mode=mode,
            ground_truth=ground_truth,
            dry_run=dry_run,
        )
    except ValidationError as exc:
        raise click.UsageError(str(exc)) from None

    async def start() -> RegradeJobPublic:
        async with service_runtime(workers=wait and not dry_run, existing=True) as services:
            job = job_public(await start_regrade(services, data, actor="cli"))
            if wait and not dry_run and job.state not in _ENDED:
                job = await _follow(services, job.id)
            return job

    job = run(start())
    _show(job, as_json=as_json)
    if job.state in ("failed", "cancelled"):
        sys.exit(1)


@regrade_group.command("status")
@click.argument("job_id")
@click.option("--json", "as_json", is_flag=True, help="print the job as JSON")
def regrade_status(job_id: str, as_json: bool) -> None:
    """A job's state, progress and estimate."""
    from api.service.regrade.schemas import job_public

    async def status() -> RegradeJobPublic:
        async with service_runtime(workers=False, existing=True) as services:
            return job_public(await services.store.regrade.get_job(job_id))

    _show(run(status()), as_json=as_json)


@regrade_group.command("flips")
@click.argument("job_id")
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]), default="json")
@click.option(
    "--verdicts",
    type=click.Choice(["effective", "judge"]),
    default="effective",
    show_default=True,
    help="effective (after human overrides) or the judges' own, for flips and kappa alike",
)
def regrade_flips(job_id: str, fmt: str, verdicts: Any) -> None:
    """What flipped between the old and the new gradings, as JSON or CSV."""
    from api.service.regrade.flips import flip_report, flips_csv
    from api.service.regrade.schemas import job_public

    async def flips() -> str:
        async with service_runtime(workers=False, existing=True) as services:
            view = await services.store.regrade.get_job(job_id)
            items = await services.store.regrade.pairs(job_id)
        if fmt == "csv":
            return flips_csv(items, verdicts=verdicts)
        report = flip_report(job_public(view).model_dump(mode="json"), items, verdicts=verdicts)
        return json.dumps(report, indent=2) + "\n"

    click.echo(run(flips()), nl=False)
