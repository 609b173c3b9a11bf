"""Running ``sre-judge`` in the test's own process (click's runner), as ``cli`` would run it.

A real process costs about a second of interpreter start-up and imports; a command that
does not depend on being a process of its own (SIGTERM drain, SIGKILL recovery, start-up
time, ``serve`` itself) tests the same behaviour in process.
"""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from click.testing import CliRunner

from api.cli.main import main

__all__ = ["cli_in_process", "run_cli"]


def cli_in_process(
    *args: str, env: dict[str, str | None], input: str | bytes | None = None
) -> subprocess.CompletedProcess[str]:
    """``sre-judge ARGS`` in process, its exit status, stdout and stderr as ``cli`` gives them
    (``env``: variables set for the command, or removed where None).

    The command runs in a thread of its own, so that its event loop never meets the
    caller's: it may be called from a synchronous test or an async one, which it blocks
    until the command ends, as ``cli`` does.
    """
    runner = CliRunner(env=env)
    with ThreadPoolExecutor(max_workers=1) as thread:
        ran = thread.submit(runner.invoke, main, list(args), input=input, catch_exceptions=False)
        result = ran.result()
    return subprocess.CompletedProcess(
        ["sre-judge", *args], result.exit_code, result.stdout, result.stderr
    )


def run_cli(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``sre-judge ARGS`` on ``database_url``, in process, as a user's terminal would run it."""
    env = {"NO_COLOR": "1", "COLUMNS": "200", "SRE_JUDGE_DATABASE_URL": database_url}
    return cli_in_process(*args, env=env)
