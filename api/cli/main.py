"""The ``sre-judge`` command line."""

from __future__ import annotations

import asyncio
import signal
import sys

import click

from api.cli.calibrate import calibrate_command
from api.cli.config import config_group
from api.cli.grade import grade_command
from api.cli.imports import import_group
from api.cli.regrade import regrade_group
from api.cli.report import export_command, report_command
from api.cli.tokens import tokens_group
from api.service.settings import Settings

__all__ = ["main"]


def _settings(**overrides: object) -> Settings:
    try:
        return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.UsageError(f"invalid configuration: {exc}") from None


@click.group()
@click.version_option(package_name="sre-judge")
def main() -> None:
    """Grade root-cause diagnoses of AI SRE agents."""


main.add_command(grade_command)
main.add_command(tokens_group)
main.add_command(report_command)
main.add_command(export_command)
main.add_command(config_group)
main.add_command(import_group)
main.add_command(regrade_group)
main.add_command(calibrate_command)


@main.command()
def migrate() -> None:
    """Upgrade the database to the newest schema."""
    from storage import upgrade

    settings = _settings()
    asyncio.run(upgrade(settings.database_url))
    click.echo("database is at the newest schema", err=True)


@main.command()
@click.option("--host", help="address to bind (default 127.0.0.1)")
@click.option("--port", type=int, help="port (default 8000)")
def serve(host: str | None, port: int | None) -> None:
    """Migrate the database and serve the API."""
    from api.http.app import create_app
    from api.http.server import run_server
    from api.service.observability import configure_logging
    from storage import upgrade

    settings = _settings(host=host, port=port)
    configure_logging(settings)
    asyncio.run(upgrade(settings.database_url))
    try:
        app = create_app(settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    run_server(app, settings)


@main.command()
def worker() -> None:
    """Run grading workers only (for extra machines sharing PostgreSQL)."""
    from api.http.app import create_app
    from api.service.observability import configure_logging

    settings = _settings()
    configure_logging(settings)

    async def run() -> None:
        app = create_app(settings)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with app.lifespan():  # starts and stops the workers
            click.echo(f"{settings.worker_count} grading workers running", err=True)
            await stop.wait()

    asyncio.run(run())


@main.group()
def audit() -> None:
    """The audit log."""


@audit.command("verify")
def audit_verify() -> None:
    """Check the audit log's hash chain; exit 1 naming the first broken row."""
    from storage import ChainReport, make_engine, verify_chain

    settings = _settings()

    async def verify() -> ChainReport:
        engine = make_engine(settings.database_url)
        try:
            return await verify_chain(engine)
        finally:
            await engine.dispose()

    report = asyncio.run(verify())
    if report.ok:
        click.echo(f"audit log intact: {report.checked} rows checked")
        return
    click.echo(f"audit log broken at row {report.first_broken_seq}: {report.reason}", err=True)
    sys.exit(1)
