"""``sre-judge report agreement``: kappa of judge vs humans, judges, and humans with each other."""

from __future__ import annotations

from typing import Any

import click

from api.cli.options import emit, filter_options, format_option, server_option
from api.reports.cli import REPORT_ALIASES, current_rubrics, fetch_report, report_command
from api.reports.cli_options import build_filter, parse_names

__all__ = ["agreement"]


@report_command.command("agreement")
@click.option(
    "--kind",
    default="",
    metavar="KINDS",
    help="comma-separated among judge_human, judge_judge, human_human (default all)",
)
@click.option("--group-by", default="", metavar="KEYS", help="comma-separated: rubric, judge")
@click.option(
    "--source",
    type=click.Choice(["all", "blind", "override"]),
    default="all",
    show_default=True,
    help="which human labels count",
)
@filter_options(aliases=REPORT_ALIASES, scope=True)
@format_option()
@server_option
def agreement(
    kind: str, group_by: str, source: str, fmt: str, server: str | None, filters: dict[str, Any]
) -> None:
    """Judge vs human labels, judge vs judge, human vs human: kappa with its 95% CI.

    \b
    Example:
      sre-judge report agreement --kind judge_human --source blind
    """
    from api.reports.agreement import (
        AgreementReport,
        agreement_table,
        build_agreement_report,
    )
    from api.reports.agreement_queries import AGREEMENT_GROUPS, AGREEMENT_KINDS

    kinds: list[Any] = parse_names(kind, AGREEMENT_KINDS, "--kind") or list(AGREEMENT_KINDS)
    groups: list[Any] = parse_names(group_by, AGREEMENT_GROUPS, "--group-by")
    params = {**filters, "kind": ",".join(kinds), "group_by": ",".join(groups) or None}
    report = fetch_report(
        server,
        AgreementReport,
        "/v1/stats/agreement",
        {**params, "source": source},
        lambda store: build_agreement_report(
            store,
            build_filter(**filters),
            kinds=kinds,
            group_by=groups,
            source=source,  # type: ignore[arg-type]
            current=current_rubrics() if "human_human" in kinds else None,
        ),
    )
    emit(report, agreement_table(report), fmt)
