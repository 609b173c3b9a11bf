"""``sre-judge audit``: checks of the append-only audit log."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from api.cli.edge import load_settings, run

if TYPE_CHECKING:
    from storage import ChainReport

__all__ = ["audit_group"]


@click.group("audit")
def audit_group() -> None:
    """The audit log."""


@audit_group.command("verify")
def audit_verify() -> None:
    """Check the audit log's hash chain; exit 1 naming the first broken row."""
    from storage import make_engine, verify_chain

    settings = load_settings()

    async def verify() -> ChainReport:
        engine = make_engine(settings.database_url)
        try:
            return await verify_chain(engine)
        finally:
            await engine.dispose()

    report = run(verify())
    if report.ok:
        click.echo(f"audit log intact: {report.checked} rows checked")
        return
    click.echo(f"audit log broken at row {report.first_broken_seq}: {report.reason}", err=True)
    sys.exit(1)
