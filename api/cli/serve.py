"""``sre-judge serve``, ``worker`` and ``migrate``: running the service.

``serve`` is the one command that starts the HTTP edge (``api.http``); ``worker``
runs the grading workers of the runtime without it.
"""

from __future__ import annotations

import asyncio
import signal

import click

from api.cli.database import require_database
from api.cli.edge import load_settings, run, upgrade_with_key

__all__ = ["migrate_command", "serve_command", "worker_command"]


@click.command("migrate")
def migrate_command() -> None:
    """Upgrade the database to the newest schema.

    \b
    Example:
      SRE_JUDGE_DATABASE_URL=postgresql+psycopg://judge@127.0.0.1:5432/judge sre-judge migrate
    """
    from storage import upgrade

    settings = load_settings()
    run(upgrade(settings.database_url))
    click.echo("database is at the newest schema", err=True)


@click.command("serve")
@click.option("--host", help="address to bind (default 127.0.0.1)")
@click.option("--port", type=int, help="port (default 8000)")
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    help="server processes sharing the port, each with its workers (PostgreSQL only above 1; "
    "they share SRE_JUDGE_JUDGE_CONCURRENCY, so at most that many; default "
    "SRE_JUDGE_PROCESSES or 1)",
)
def serve_command(host: str | None, port: int | None, processes: int | None) -> None:
    """Migrate the database and serve the API.

    On start it says which judge it will use, at which address, whether the judge
    answered, and which setting changes it (SRE_JUDGE_JUDGE, or SRE_JUDGE_PANEL).

    \b
    Example:
      SRE_JUDGE_JUDGE=ollama:qwen3:8b sre-judge serve --host 0.0.0.0 --port 8000
    """
    from api.http.app import create_app
    from api.http.server import announce_judge_on_start, check_listen_address, run_server
    from api.service.observability import configure_logging
    from api.service.runtime import read_start_files

    settings = load_settings(host=host, port=port, processes=processes)
    if settings.processes > 1 and not settings.database_url.startswith("postgres"):
        raise click.UsageError(
            "--processes above 1 needs PostgreSQL: SQLite admits one writer at a time, so "
            "more processes would only queue for its lock"
        )
    if settings.processes > 1:
        from api.http.processes import judge_shares

        try:  # the processes share the judge concurrency: each needs a call
            judge_shares(settings.judge_concurrency, settings.processes)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    # every setting is checked before the database is touched: a mistyped one must not
    # upgrade a schema, then refuse to start
    try:
        check_listen_address(settings)
        files = read_start_files(settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    configure_logging(settings)
    run(upgrade_with_key(settings))  # the service key too is checked first
    try:
        app = create_app(settings, start_files=files)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if settings.processes > 1:
        from api.http.processes import run_processes

        # checked; each process builds its own, the first one announces the judge. The
        # parent serves nothing: it keeps no database connection while its children run
        app.state.runtime.engine.dispose()
        del app
        raise SystemExit(run_processes(settings, settings.processes))
    announce_judge_on_start(app)
    run_server(app, settings)


@click.command("worker")
def worker_command() -> None:
    """Run grading workers only (for extra machines sharing PostgreSQL).

    \b
    Example:
      SRE_JUDGE_DATABASE_URL=postgresql+psycopg://judge@db:5432/judge sre-judge worker
    """
    from api.service.observability import configure_logging
    from api.service.runtime import Runtime
    from storage import require_newest

    settings = load_settings()
    if settings.worker_count == 0:
        raise click.UsageError(
            "invalid configuration: SRE_JUDGE_WORKERS: `sre-judge worker` with 0 grading "
            "workers would grade nothing; set 1 or more, or leave it unset"
        )
    configure_logging(settings)
    # a worker never migrates: one of an older release must not write to a newer schema;
    # nor does it make an empty database where none is
    require_database(settings.database_url)
    run(asyncio.to_thread(require_newest, settings.database_url))
    try:
        # a worker joins a deployment: it is given its key, never makes one
        runtime = Runtime(settings, workers=True, import_jobs=True, create_key=False)
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
