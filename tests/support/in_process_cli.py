"""Running ``sre-judge`` in the test's own process (click's runner), as ``cli`` would run it.

A real process costs about a second of interpreter start-up and imports; a command that
does not depend on being a process of its own (SIGTERM drain, SIGKILL recovery, start-up
time, ``serve`` itself) tests the same behaviour in process.
"""

from __future__ import annotations

import subprocess

from click.testing import CliRunner

from api.cli.main import main

__all__ = ["cli_in_process"]


def cli_in_process(
    *args: str, env: dict[str, str], input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``sre-judge ARGS`` in process, its exit status, stdout and stderr as ``cli`` gives them.

    Call it from synchronous code (the commands run their own event loop) or through
    ``asyncio.to_thread``.
    """
    result = CliRunner(env=env).invoke(main, list(args), input=input, catch_exceptions=False)
    return subprocess.CompletedProcess(
        ["sre-judge", *args], result.exit_code, result.stdout, result.stderr
    )
