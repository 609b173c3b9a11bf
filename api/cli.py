"""The ``sre-judge`` command line."""

from __future__ import annotations

import click

from api.cli_grade import grade_command

__all__ = ["main"]


@click.group()
@click.version_option(package_name="sre-judge")
def main() -> None:
    """Grade root-cause diagnoses of AI SRE agents."""


main.add_command(grade_command)
