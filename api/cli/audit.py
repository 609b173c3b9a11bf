"""``sre-judge audit``: checks of the append-only audit log and its signed checkpoints.

Every command needs the service key the log was written with and never creates one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.database import require_database, require_migrated
from api.cli.edge import load_settings, run, service_key
from api.service.settings import checkpoint_target_fault, mask_passwords
from api.terminal import terminal_text

if TYPE_CHECKING:
    from api.service.settings import Settings
    from storage import ChainReport, Checkpoint

__all__ = ["audit_group"]

#: state problems printed before "... and N more"
_SHOWN = 20


@click.group("audit")
def audit_group() -> None:
    """The audit log.

    \b
    Example:
      sre-judge audit verify --checkpoint checkpoints.jsonl
    """


@audit_group.command("verify")
@click.option(
    "--checkpoint",
    "checkpoint_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="a checkpoint file (JSON Lines): its newest checkpoint must still hold "
    "(default: the file serve writes them to, when it is a file)",
)
def audit_verify(checkpoint_file: Path | None) -> None:
    """Check the keyed hash chain, the gradings and records it covers, and the newest
    checkpoint; exit 1 naming what is wrong.

    \b
    Example:
      sre-judge audit verify --checkpoint checkpoints.jsonl
    """
    from storage import ChainKey, check_checkpoint, make_engine, verify_chain

    settings = load_settings()
    require_database(settings.database_url)  # names the database before the key
    key = service_key(settings, create=False)
    checkpoint, unreadable = _newest_checkpoint(settings, checkpoint_file)

    async def verify() -> tuple[ChainReport, str | None]:
        await require_migrated(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            report = await verify_chain(engine, key=ChainKey.of(key))
            held = None if checkpoint is None else await check_checkpoint(engine, key, checkpoint)
            return report, held
        finally:
            engine.dispose()

    report, checkpoint_problem = run(verify())
    _print_report(report, checkpoint, checkpoint_problem)
    if unreadable is not None:
        click.echo(terminal_text(f"checkpoint file broken: {unreadable}", one_line=True), err=True)
    if not report.ok or checkpoint_problem is not None or unreadable is not None:
        sys.exit(1)


def _newest_checkpoint(
    settings: Settings, given: Path | None
) -> tuple[Checkpoint | None, str | None]:
    """The newest checkpoint (highest ``seq``, :func:`newest_checkpoint`) of
    ``--checkpoint``, else of the configured (or default) checkpoint file; None, said on
    stderr, when there is none to check.

    Only the newest is checked: with the chain intact, the row it pins vouches for every
    row before it, so the older checkpoints would add nothing.

    A ``--checkpoint`` file that cannot be read or holds none is a usage error; the
    file ``serve`` writes to that exists yet reads so (garbled, emptied) is a broken
    check, returned second: its checkpoints are what a rollback of the log would need
    gone."""
    from api.service.checkpoints import (
        checkpoint_target,
        is_url,
        newest_checkpoint,
        read_checkpoints,
    )
    from storage import CheckpointError

    path = given
    if path is None:
        target = checkpoint_target(settings)
        if target is None:
            click.echo("no checkpoint checked: checkpoints are off", err=True)
            return None, None
        if is_url(target):
            click.echo(
                f"no checkpoint checked: they are sent to {mask_passwords(target)}; "
                "pass --checkpoint FILE with a copy of the witness's",
                err=True,
            )
            return None, None
        path = Path(target)
        if not path.exists():
            click.echo(f"no checkpoint checked: {path} does not exist yet", err=True)
            return None, None
    try:
        found = newest_checkpoint(read_checkpoints(path))
    except CheckpointError as exc:
        problem = str(exc)
    else:
        if found is not None:
            return found, None
        problem = f"{path} holds no checkpoint"
    if given is not None:
        raise click.BadParameter(problem, param_hint="--checkpoint")
    return None, problem


def _print_report(report: ChainReport, checkpoint: Checkpoint | None, problem: str | None) -> None:
    if report.first_broken_seq is not None:
        broken = f"audit log broken at row {report.first_broken_seq}: {report.reason}"
        click.echo(terminal_text(broken, one_line=True), err=True)
    else:
        legacy = f" ({report.legacy_rows} legacy rows, unkeyed)" if report.legacy_rows else ""
        click.echo(f"audit chain intact: {report.checked} rows checked{legacy}")
        uncovered = (
            f"; {report.gradings_uncovered} older gradings not covered"
            if report.gradings_uncovered
            else ""
        )
        click.echo(f"gradings' state: {report.gradings_checked} checked{uncovered}")
        records = (
            f"; {report.records_uncovered} older records not covered"
            if report.records_uncovered
            else ""
        )
        click.echo(f"records' state: {report.records_checked} checked{records}")
    for line in report.state_problems[:_SHOWN]:
        shown = terminal_text(f"state broken: {line}", one_line=True)  # names stored ids
        click.echo(shown, err=True)
    if len(report.state_problems) > _SHOWN:
        click.echo(f"state broken: ... and {len(report.state_problems) - _SHOWN} more", err=True)
    if checkpoint is None:
        return
    if problem is None:
        click.echo(f"checkpoint holds: row {checkpoint.seq} of {checkpoint.time}")
    else:
        click.echo(
            f"checkpoint of row {checkpoint.seq} ({checkpoint.time}) broken: {problem}", err=True
        )


def _checkpoint_out(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--out`` as ``SRE_JUDGE_AUDIT_CHECKPOINT`` takes a target: a file or an http(s) URL
    (:func:`checkpoint_target_fault`); ``off`` turns nothing off here, it is refused."""
    from api.service.checkpoints import CHECKPOINTS_OFF

    if value is None:
        return None
    if value.strip().lower() == CHECKPOINTS_OFF:
        raise click.BadParameter(
            f"{value!r} is no checkpoint target: give a file path or an http(s) URL (with "
            "SRE_JUDGE_AUDIT_CHECKPOINT=off and no --out, the checkpoint is printed)"
        )
    fault = checkpoint_target_fault(value)
    if fault is not None:
        raise click.BadParameter(fault)
    return value


@audit_group.command("checkpoint")
@click.option(
    "--out",
    callback=_checkpoint_out,
    help="a file to append to or an http(s) URL to POST to "
    "(default SRE_JUDGE_AUDIT_CHECKPOINT, else the default file; printed when off)",
)
def audit_checkpoint(out: str | None) -> None:
    """Sign the log's head after checking it extends the previous checkpoint; write it.

    \b
    Example:
      sre-judge audit checkpoint --out checkpoints.jsonl
    """
    from api.service.checkpoints import checkpoint_target, write_checkpoint
    from storage import Store, make_engine

    settings = load_settings()
    require_database(settings.database_url)  # names the database before the key
    key = service_key(settings, create=False)
    target = out or checkpoint_target(settings)

    async def checkpoint() -> Checkpoint:
        await require_migrated(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            return await write_checkpoint(Store(engine, key=key), target)
        finally:
            engine.dispose()

    written = run(checkpoint())
    if target is None:
        click.echo(written.to_json())
    else:
        click.echo(f"checkpoint of row {written.seq} written to {mask_passwords(target)}")


@audit_group.command("backfill")
def audit_backfill() -> None:
    """Adopt what an older version wrote: legacy rows, gradings and records without digests.

    Appends keyed events that state the number of legacy (unkeyed) rows and carry the
    digests of every grading and record written before the log covered them, as they
    now stand; rows written since, whose audit rows are missing, are not adopted. Run
    it once after upgrading, with the service key.

    \b
    Example:
      sre-judge audit backfill && sre-judge audit verify
    """
    from storage import make_engine
    from storage.audit.backfill import BackfillError, BackfillReport, backfill
    from storage.database import Database

    settings = load_settings()
    require_database(settings.database_url)  # names the database before the key
    key = service_key(settings, create=False)

    async def adopt() -> BackfillReport:
        await require_migrated(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            return await backfill(Database(engine, key=key))
        finally:
            engine.dispose()

    try:
        done = run(adopt())
    except BackfillError as exc:
        click.echo(f"nothing adopted: {exc}", err=True)
        sys.exit(1)
    click.echo(
        f"adopted {done.legacy_rows} legacy rows, {done.gradings} gradings and "
        f"{done.records} records in {done.events} audit events"
    )
