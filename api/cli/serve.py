"""``sre-judge serve``, ``worker`` and ``migrate``: running the service.

``serve`` is the one command that starts the HTTP edge (``api.http``); ``worker``
runs the grading workers of the runtime without it.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import click

from api.cli.edge import load_settings, run

__all__ = ["migrate_command", "serve_command", "worker_command"]


@click.command("migrate")
def migrate_command() -> None:
    """Upgrade the database to the newest schema."""
    from storage import upgrade

    settings = load_settings()
    run(upgrade(settings.database_url))
    click.echo("database is at the newest schema", err=True)


@click.command("serve")
@click.option("--host", help="address to bind (default 127.0.0.1)")
@click.option("--port", type=int, help="port (default 8000)")
def serve_command(host: str | None, port: int | None) -> None:
    """Migrate the database and serve the API.

    On start it says which judge it will use, at which address, whether the judge
    answered, and which setting changes it (SRE_JUDGE_JUDGE, or SRE_JUDGE_PANEL).

    Example: SRE_JUDGE_JUDGE=openai:qwen2.5-1.5b@http://127.0.0.1:8080/v1 sre-judge serve
    """
    from api.http.app import create_app
    from api.http.server import run_server
    from api.service.judge_status import judge_status, startup_message
    from api.service.observability import configure_logging
    from storage import upgrade

    settings = load_settings(host=host, port=port)
    configure_logging(settings)
    run(upgrade(settings.database_url))
    try:
        app = create_app(settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    async def announce_judge(app: Any) -> None:
        click.echo(startup_message(await judge_status(app.state.services)), err=True)

    app.on_startup.append(announce_judge)
    run_server(app, settings)


@click.command("worker")
def worker_command() -> None:
    """Run grading workers only (for extra machines sharing PostgreSQL)."""
    from api.service.observability import configure_logging
    from api.service.runtime import Runtime

    settings = load_settings()
    configure_logging(settings)
    try:
        runtime = Runtime(settings, workers=True, import_jobs=True)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    async def work() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with runtime:  # starts and stops the workers
            click.echo(f"{settings.worker_count} grading workers running", err=True)
            await stop.wait()

    run(work())
