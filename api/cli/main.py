"""The ``sre-judge`` command line: the click group, its commands listed by ``api.app``."""

from __future__ import annotations

import click

from api.app import commands
from api.cli.edge import OneLineGroup

__all__ = ["main"]


@click.group(cls=OneLineGroup)
@click.version_option(package_name="sre-judge")
def main() -> None:
    """Grade root-cause diagnoses of AI SRE agents.

    Output: --format table|json|csv (table on a terminal, else json). Filters: the same
    flags on report, export and regrade. Files: '-' is stdin or stdout. Errors: one line,
    exit 2.

    \b
    Example:
      sre-judge grade --ground-truth "payment pod OOM" --diagnosis "checkout OOMKilled"
    """


for command in commands():
    main.add_command(command)
