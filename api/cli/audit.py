"""``sre-judge audit``: checks of the append-only audit log and its signed checkpoints.

Both commands need the service key the log was written with and never create one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from api.cli.database import require_database, require_migrated
from api.cli.edge import load_settings, run, service_key

if TYPE_CHECKING:
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
    help="a checkpoint file (JSON Lines): its newest checkpoint must still hold",
)
def audit_verify(checkpoint_file: Path | None) -> None:
    """Check the keyed hash chain and the gradings' state it covers; exit 1 naming what is wrong.

    \b
    Example:
      sre-judge audit verify --checkpoint checkpoints.jsonl
    """
    from api.service.checkpoints import read_checkpoints
    from storage import ChainKey, CheckpointError, check_checkpoint, make_engine, verify_chain

    settings = load_settings()
    require_database(settings.database_url)  # names the database before the key
    key = service_key(settings, create=False)
    checkpoint: Checkpoint | None = None
    if checkpoint_file is not None:
        try:
            found = read_checkpoints(checkpoint_file)
        except CheckpointError as exc:
            raise click.BadParameter(str(exc), param_hint="--checkpoint") from None
        if not found:
            raise click.BadParameter(
                f"{checkpoint_file} holds no checkpoint", param_hint="--checkpoint"
            )
        checkpoint = found[-1]

    async def verify() -> tuple[ChainReport, str | None]:
        await require_migrated(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            report = await verify_chain(engine, key=ChainKey.of(key))
            held = None if checkpoint is None else await check_checkpoint(engine, key, checkpoint)
            return report, held
        finally:
            await engine.dispose()

    report, checkpoint_problem = run(verify())
    _print_report(report, checkpoint, checkpoint_problem)
    if not report.ok or checkpoint_problem is not None:
        sys.exit(1)


def _print_report(report: ChainReport, checkpoint: Checkpoint | None, problem: str | None) -> None:
    if report.first_broken_seq is not None:
        click.echo(f"audit log broken at row {report.first_broken_seq}: {report.reason}", err=True)
    else:
        legacy = f" ({report.legacy_rows} legacy rows, unkeyed)" if report.legacy_rows else ""
        click.echo(f"audit chain intact: {report.checked} rows checked{legacy}")
        uncovered = (
            f"; {report.gradings_uncovered} older gradings not covered"
            if report.gradings_uncovered
            else ""
        )
        click.echo(f"gradings' state: {report.gradings_checked} checked{uncovered}")
    for line in report.state_problems[:_SHOWN]:
        click.echo(f"state broken: {line}", err=True)
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


@audit_group.command("checkpoint")
@click.option(
    "--out",
    help="a file to append to or an http(s) URL to POST to "
    "(default SRE_JUDGE_AUDIT_CHECKPOINT; without either, printed)",
)
def audit_checkpoint(out: str | None) -> None:
    """Sign the log's head after checking it extends the previous checkpoint; write it.

    \b
    Example:
      sre-judge audit checkpoint --out checkpoints.jsonl
    """
    from api.service.checkpoints import write_checkpoint
    from storage import Store, make_engine

    settings = load_settings()
    require_database(settings.database_url)  # names the database before the key
    key = service_key(settings, create=False)
    target = out or settings.audit_checkpoint

    async def checkpoint() -> Checkpoint:
        await require_migrated(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            return await write_checkpoint(Store(engine, key=key), target)
        finally:
            await engine.dispose()

    written = run(checkpoint())
    if target is None:
        click.echo(written.to_json())
    else:
        click.echo(f"checkpoint of row {written.seq} written to {target}")
