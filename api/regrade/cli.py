"""``sre-judge regrade``: start a regrade job, follow it, read what flipped.

``--wait`` grades the job in this process (with the configured number of workers,
beside any server or ``sre-judge worker`` sharing the database) and shows a progress
bar until the job ends; with ``--server`` the server grades and this command polls.
Exit status: 0 done, 1 failed or cancelled, 2 bad usage (an unknown job id included).
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import run, service_runtime
from api.cli.options import deprecated, filter_options, format_option, server_option
from api.cli.output import echo_json
from api.cli.remote import poll_waits
from api.terminal import terminal_text

if TYPE_CHECKING:  # the commands import the service when they run, keeping --help fast
    from api.regrade.schemas import RegradeJobCreate, RegradeJobPublic
    from api.service.services import Services

__all__ = ["REGRADE_ALIASES", "regrade_group"]


#: states a job does not leave by itself (as ``storage.regrade.tables._ENDED``)
_ENDED = ("done", "failed", "cancelled")
#: the old ``--filter-*`` names, kept as hidden deprecated aliases of the shared filter flags
REGRADE_ALIASES = {
    "--filter-agent": "agent",
    "--filter-model": "model",
    "--filter-scenario": "scenario_id",
    "--filter-after": "created_after",
    "--filter-before": "created_before",
    "--filter-rubric-version": "rubric",
    "--filter-judge": "judge",
    "--filter-scenario-set": "scenario_set",
}


def _rubric(job: RegradeJobPublic) -> str:
    """The job's rubric, or, for a job that names none, the rubrics its items keep."""
    if job.rubric is not None:
        return f"rubric {job.rubric['id']}@{job.rubric['version']}"
    kept = [f"{r['id']}@{r['version']}" for r in job.estimate.get("rubrics", [])]
    return "each submission's rubric" + (f" ({', '.join(kept)})" if kept else "")


def _show(job: RegradeJobPublic, fmt: str) -> None:
    if fmt == "json":
        echo_json(job.model_dump(mode="json"), indent=2)
        return
    estimate = job.estimate
    click.echo(
        f"regrade job {job.id}: {job.state}{' (dry run)' if job.dry_run else ''}, {job.mode}, "
        f"{_rubric(job)}, judge {job.judge}, "
        f"ground truth {job.ground_truth}\n"
        f"  submissions {job.total}; done {job.done}, failed {job.failed}, "
        f"cancelled {job.cancelled}, remaining {job.remaining}\n"
        f"  judge calls {job.judge_calls}, cache hits {job.cache_hits}\n"
        f"  estimate: {estimate.get('judge_calls')} judge calls after "
        f"{estimate.get('cache_hits')} cache hits (cache per {estimate.get('cache_granularity')}), "
        f"~{estimate.get('prompt_tokens')} prompt and ~{estimate.get('completion_tokens')} "
        f"completion tokens"
    )
    cost = estimate.get("cost_usd") or {}
    if cost.get("live") is not None:
        click.echo(f"  cost: ~${cost['live']} live, ~${cost['batch']} through the Batch API")
    batch = job.batch
    if batch is not None:
        click.echo(
            f"  engine {batch['engine']} ({batch['state']}, retry {batch['retry']}): requests "
            f"{batch['requests']} written, {batch['submitted']} submitted, "
            f"{batch['completed']} completed, {batch['failed']} failed; tokens "
            f"{batch['prompt_tokens']} prompt, {batch['completion_tokens']} completion"
        )
        if batch.get("error"):
            tries = batch.get("failures") or 0
            error = terminal_text(batch["error"], one_line=True)
            click.echo(
                f"  last step failed ({tries} in a row; next try "
                f"{batch.get('retry_at') or 'at the next round'}): {error}"
            )
    elif job.engine != "live":
        click.echo(f"  engine {job.engine}")


async def _follow(services: Services, job_id: str) -> RegradeJobPublic:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    from api.regrade import use_cases

    console = Console(stderr=True)
    columns = (
        TextColumn("regrading"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[note]}"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=console, transient=False) as progress:
        job = await use_cases.regrade_job(services, job_id)
        task = progress.add_task("job", total=job.total, note="")
        waits = poll_waits()
        while True:
            finished = job.done + job.failed + job.cancelled
            note = f"failed {job.failed}, cache hits {job.cache_hits}, {job.state}"
            progress.update(task, completed=finished, note=note)
            if job.state in _ENDED:
                return job
            await asyncio.sleep(next(waits))
            job = await use_cases.regrade_job(services, job_id)


def _job_request(options: dict[str, Any]) -> RegradeJobCreate:
    """The job to start from the command's options; bad usage naming what is wrong."""
    from pydantic import ValidationError

    from api.regrade.schemas import RegradeFilterIn, RegradeJobCreate

    values = dict(options.pop("filters"))
    if "rubric" in values:  # the shared --graded-rubric is the job filter's rubric_version
        values["rubric_version"] = values.pop("rubric")
    passed, tags = options.pop("passed"), list(options.pop("tags"))
    if options.get("alias_passed"):
        deprecated("--filter-passed", "--passed")
        passed = passed or options["alias_passed"]
    if options.get("alias_tags"):
        deprecated("--filter-tag", "--tag")
        tags += options["alias_tags"]
    if passed is not None:
        values["passed"] = passed == "pass"
    if tags:
        values["tags"] = tags
    try:
        return RegradeJobCreate(
            filter=RegradeFilterIn.model_validate(values),
            rubric=options["rubric"],
            judge=options["judge"],
            mode=options["mode"],
            ground_truth=options["ground_truth"],
            dry_run=options["dry_run"],
            engine=options["engine"],
            engine_retry=options["engine_retry"],
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(p) for p in error["loc"])
        raise click.UsageError(f"{where}: {error['msg']}") from None


def _start_local(data: RegradeJobCreate, wait: bool) -> RegradeJobPublic:
    from api.regrade.schemas import job_public
    from api.regrade.use_cases import start_regrade

    async def start() -> RegradeJobPublic:
        async with service_runtime(workers=wait and not data.dry_run, existing=True) as services:
            job = job_public(await start_regrade(services, data, actor="cli"), engine=data.engine)
            if wait and not data.dry_run and job.state not in _ENDED:
                job = await _follow(services, job.id)
            return job

    return run(start())


def _start_remote(server: str, data: RegradeJobCreate, wait: bool) -> RegradeJobPublic:
    """Start the job on ``server``; with ``wait``, follow it, a line on stderr per look
    naming the job first, so a follow cut short (the server away) still names it."""
    import time

    from api.cli.remote import remote
    from api.regrade.schemas import RegradeJobPublic

    def progress(job: RegradeJobPublic) -> None:
        finished = job.done + job.failed + job.cancelled
        line = f"regrade job {job.id}: {job.state}, {finished}/{job.total} submissions"
        click.echo(terminal_text(line, one_line=True), err=True)

    body = data.model_dump(mode="json", exclude_none=True)
    with remote(server) as client:
        job = RegradeJobPublic.model_validate(client.post_json("/v1/regrade-jobs", body))
        following = wait and not data.dry_run
        if following:
            progress(job)
        waits = poll_waits()
        while following and job.state not in _ENDED:
            time.sleep(next(waits))
            job = RegradeJobPublic.model_validate(client.get_json(f"/v1/regrade-jobs/{job.id}"))
            progress(job)
    return job


@click.group("regrade", invoke_without_command=True)
@click.option(
    "--rubric",
    help="target rubric: id or id@version (default: each submission keeps its own, the "
    "current version of the rubric it was graded with)",
)
@click.option(
    "--judge",
    help="target judge BACKEND:MODEL[@URL] or panel:SPEC1,SPEC2 (default: the service's, "
    "the panel when SRE_JUDGE_PANEL is set)",
)
@click.option("--mode", type=click.Choice(["shadow", "promote"]), default="shadow")
@click.option(
    "--ground-truth",
    type=click.Choice(["as_submitted", "latest"]),
    default="as_submitted",
    show_default=True,
    help="grade against each submission's own ground truth, or its scenario's newest version",
)
@filter_options(aliases=REGRADE_ALIASES)
@click.option("--passed", type=click.Choice(["pass", "fail"]), help="only current verdicts")
@click.option("--filter-passed", "alias_passed", type=click.Choice(["pass", "fail"]), hidden=True)
@click.option("--tag", "tags", multiple=True, help="only scenarios with this tag (repeatable)")
@click.option("--filter-tag", "alias_tags", multiple=True, hidden=True)
@click.option("--dry-run", is_flag=True, help="print counts and estimates; store nothing")
@click.option(
    "--engine",
    type=click.Choice(["live", "batch", "offline"]),
    default="live",
    show_default=True,
    help="live judge requests; the OpenAI Batch API; or offline: `regrade requests` writes "
    "the requests file, `regrade results` imports the engine's results",
)
@click.option(
    "--engine-retry",
    type=click.Choice(["live", "batch"]),
    default="live",
    show_default=True,
    help="a batch request that failed or is missing: ask it live, or in a new batch",
)
@click.option("--wait", is_flag=True, help="grade here and show progress until the job ends")
@format_option("table", "json", legacy_json=True)
@server_option
@click.pass_context
def regrade_group(ctx: click.Context, /, **options: Any) -> None:
    """Start a regrade job of the gradings in the filter (subcommands: status, flips).

    \b
    Example:
      sre-judge regrade --judge openai:judge-b --graded-judge external:sregym --dry-run
    """
    if ctx.invoked_subcommand is not None:
        return
    fmt, server, wait = options.pop("fmt"), options.pop("server"), options.pop("wait")
    data = _job_request(options)
    if wait and data.engine == "offline" and not data.dry_run:
        raise click.UsageError(
            "an offline job waits for its results file: start it without --wait, then "
            "`regrade requests JOB_ID -o FILE` and `regrade results JOB_ID FILE --wait`"
        )
    job = _start_remote(server, data, wait) if server is not None else _start_local(data, wait)
    _show(job, fmt)
    if job.state in ("failed", "cancelled"):
        sys.exit(1)


@regrade_group.command("status")
@click.argument("job_id")
@format_option("table", "json", legacy_json=True)
@server_option
def regrade_status(job_id: str, fmt: str, server: str | None) -> None:
    """A job's state, progress and estimate.

    \b
    Example:
      sre-judge regrade status 01J9Z3K7Q2 --format json
    """
    from api.regrade import use_cases
    from api.regrade.schemas import RegradeJobPublic

    if server is not None:
        from api.cli.remote import remote

        with remote(server) as client:
            found = client.get_json(f"/v1/regrade-jobs/{job_id}")
        _show(RegradeJobPublic.model_validate(found), fmt)
        return

    async def status() -> RegradeJobPublic:
        async with service_runtime(workers=False, existing=True) as services:
            return await use_cases.regrade_job(services, job_id)

    _show(run(status()), fmt)


@regrade_group.command("flips")
@click.argument("job_id")
@format_option("table", "json", "csv")
@click.option(
    "--verdicts",
    type=click.Choice(["effective", "judge"]),
    default="effective",
    show_default=True,
    help="effective (after human overrides) or the judges' own, for flips and kappa alike",
)
@server_option
def regrade_flips(job_id: str, fmt: str, verdicts: Any, server: str | None) -> None:
    """What flipped between the old and the new gradings: tables, JSON or CSV.

    The pass rates before and after come with their paired difference (McNemar's exact
    test, Newcombe's paired 95% interval: both gradings are of the same submissions).
    CSV has one row per item.

    \b
    Example:
      sre-judge regrade flips 01J9Z3K7Q2 --verdicts judge --format csv > flips.csv
    """
    from api.cli.output import print_tables
    from api.regrade import use_cases
    from api.regrade.flips import flip_report, flip_tables, flips_csv

    if server is not None:
        from api.cli.remote import remote

        with remote(server) as client:
            params = {"format": "csv" if fmt == "csv" else "json", "verdicts": verdicts}
            answer = client.send("GET", f"/v1/regrade-jobs/{job_id}/flips", params=params)
        if fmt == "table":
            print_tables(flip_tables(answer.json()))
            return
        if fmt == "csv":
            click.echo(answer.text, nl=False)
        else:
            echo_json(answer.json(), indent=2)
        return

    async def flips() -> str | dict[str, Any]:
        async with service_runtime(workers=False, existing=True) as services:
            job, items = await use_cases.regrade_flips(services, job_id)
        if fmt == "csv":
            return flips_csv(items, verdicts=verdicts)
        return flip_report(job.model_dump(mode="json"), items, verdicts=verdicts)

    found = run(flips())
    if isinstance(found, str):
        click.echo(found, nl=False)
    elif fmt == "table":
        print_tables(flip_tables(found))
    else:
        echo_json(found, indent=2)


@regrade_group.command("requests")
@click.argument("job_id")
@click.option(
    "-o", "--output", "output", type=click.Path(dir_okay=False), required=True, help="- for stdout"
)
@server_option
def regrade_requests(job_id: str, output: str, server: str | None) -> None:
    """Write an offline job's judge requests as OpenAI-batch JSON lines.

    One line per request with no reply yet, for `vllm run-batch`, Ray Data's LLM
    processors or any runner of that format; the requests are rendered first if that is
    still to do. The file is written as FILE.part and renamed when whole.

    \b
    Example:
      sre-judge regrade requests 01J9Z3K7Q2 -o requests.jsonl
    """
    if server is not None:
        from api.cli.remote import remote

        with remote(server) as client:
            text = client.send("GET", f"/v1/regrade-jobs/{job_id}/batch-requests").text
    else:
        from api.regrade.use_cases import batch_requests

        async def render() -> str:
            async with service_runtime(workers=False, existing=True) as services:
                lines = await batch_requests(services, job_id, actor="cli")
            return "".join(f"{line}\n" for line in lines)

        text = run(render())
    count = text.count("\n")
    if output == "-":
        click.echo(text, nl=False)
    else:
        from pathlib import Path

        part = Path(f"{output}.part")
        part.write_text(text, encoding="utf-8")
        part.replace(output)
    click.echo(f"{count} requests written", err=True)


@regrade_group.command("results")
@click.argument("job_id")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--wait", is_flag=True, help="grade here and show progress until the job ends")
@format_option("table", "json", legacy_json=True)
@server_option
def regrade_results(job_id: str, file: str, wait: bool, fmt: str, server: str | None) -> None:
    """Import an offline job's results file (OpenAI-batch output JSON lines).

    Each result is checked against its request (known custom id, given once, the same
    model) and its reply kept once; importing a file again keeps nothing twice. Exit 2
    when a line cannot be read (nothing is stored), 1 when results were refused.

    \b
    Example:
      sre-judge regrade results 01J9Z3K7Q2 results.jsonl --wait
    """
    from pathlib import Path

    from api.regrade.schemas import BatchResultsPublic, RegradeJobPublic

    raw = sys.stdin.buffer.read() if file == "-" else Path(file).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        reason = f"is not UTF-8 text ({exc.reason} at byte {exc.start})"
        raise click.BadParameter(reason, param_hint="FILE") from exc
    job: RegradeJobPublic | None = None
    if server is not None:
        import time

        from api.cli.remote import remote

        with remote(server) as client:
            answer = client.send(
                "POST",
                f"/v1/regrade-jobs/{job_id}/batch-results",
                content=text.encode("utf-8"),
                headers={"Content-Type": "application/jsonl"},
            )
            report = BatchResultsPublic.model_validate(answer.json())
            waits = poll_waits()
            while wait:
                job = RegradeJobPublic.model_validate(client.get_json(f"/v1/regrade-jobs/{job_id}"))
                if job.state in _ENDED:
                    break
                time.sleep(next(waits))
    else:
        from api.regrade import use_cases

        async def load() -> tuple[BatchResultsPublic, RegradeJobPublic | None]:
            async with service_runtime(workers=wait, existing=True) as services:
                found = await use_cases.batch_results(services, job_id, text, actor="cli")
                followed = await _follow(services, job_id) if wait else None
            return found, followed

        report, job = run(load())
    if fmt == "json":
        found = report.model_dump(mode="json")
        if job is not None:
            found = {"results": found, "job": job.model_dump(mode="json")}
        echo_json(found, indent=2)
    else:
        click.echo(
            f"results for job {job_id}: {report.answered} replies kept, {report.failed} failed "
            f"(retried), {report.duplicates} duplicates (kept already), {report.refused} refused; "
            f"engine {report.state}"
        )
        for refusal in report.refusals[:20]:
            shown = terminal_text(
                f"  line {refusal.line} {refusal.custom_id}: {refusal.reason}", one_line=True
            )
            click.echo(shown, err=True)
    if job is not None and fmt != "json":
        _show(job, fmt)
    if report.refused:
        sys.exit(1)
