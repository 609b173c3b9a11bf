"""The ``sre-judge`` command line: one module per command group, assembled here."""

from __future__ import annotations

import click

import api.reports.agreement_cli  # noqa: F401  (registers `report agreement`)
from api.cli.audit import audit_group
from api.cli.config import config_group
from api.cli.edge import OneLineGroup
from api.cli.serve import migrate_command, serve_command, worker_command
from api.grading.grade_cli import grade_command
from api.grading.gradings_cli import gradings_group
from api.grading.submit_cli import submit_command
from api.imports.cli import import_group
from api.judges.cli import calibrate_command
from api.regrade.cli import regrade_group
from api.reports.cli import report_command
from api.reports.export_cli import export_command
from api.scenarios.cli import scenarios_group
from api.tokens.cli import tokens_group

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


for command in (
    serve_command,
    worker_command,
    migrate_command,
    grade_command,
    submit_command,
    tokens_group,
    report_command,
    export_command,
    config_group,
    import_group,
    regrade_group,
    scenarios_group,
    calibrate_command,
    audit_group,
    gradings_group,
):
    main.add_command(command)
