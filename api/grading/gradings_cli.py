"""``sre-judge gradings``: admin work on stored gradings (moving pending ones to a judge)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from api.cli.edge import run, service_runtime
from api.cli.options import format_option, server_option
from api.cli.output import echo_json

if TYPE_CHECKING:
    from api.grading.judge_moves import JudgeMoveReport, JudgeMoveRequest

__all__ = ["gradings_group"]


@click.group("gradings")
def gradings_group() -> None:
    """Stored gradings: admin actions.

    \b
    Example:
      sre-judge gradings move-judge --from ollama:qwen2.5:7b-instruct
    """


#: the option of each field a refusal names
_OPTIONS = {"from_judge": "--from", "to_judge": "--to"}


def _move_local(data: JudgeMoveRequest) -> JudgeMoveReport:
    from api.grading.judge_moves import move_pending_gradings
    from api.service.errors import InvalidRequest
    from api.service.principal import Principal

    async def move() -> JudgeMoveReport:
        async with service_runtime(existing=True) as services:
            cli = Principal(id="cli", name="cli", role="admin")
            try:
                return await move_pending_gradings(services, cli, data)
            except InvalidRequest as exc:
                hint = _OPTIONS.get(exc.field or "")
                raise click.BadParameter(exc.detail, param_hint=hint) from None

    return run(move())


def _move_remote(server: str, data: JudgeMoveRequest) -> JudgeMoveReport:
    from api.cli.remote import remote
    from api.grading.judge_moves import JudgeMoveReport

    body = data.model_dump(mode="json", exclude_none=True)
    with remote(server) as client:
        return JudgeMoveReport.model_validate(client.post_json("/v1/gradings:move-judge", body))


@gradings_group.command("move-judge")
@click.option(
    "--from",
    "from_judge",
    required=True,
    metavar="SPEC",
    help="the judge spec the pending gradings are bound to, as recorded (admins see it in readyz)",
)
@click.option(
    "--to",
    "to_judge",
    metavar="SPEC",
    help="the judge to bind them to (default: the configured one: SRE_JUDGE_JUDGE or _PANEL)",
)
@format_option("table", "json")
@server_option
def gradings_move_judge(
    from_judge: str, to_judge: str | None, fmt: str, server: str | None
) -> None:
    """Move the pending gradings bound to one judge to another, each move audited.

    For SRE_JUDGE_PENDING_JUDGE=pin (with follow, the default, they move to the
    configured judge by themselves). Gradings of regrade jobs keep their job's judge.

    \b
    Example:
      sre-judge gradings move-judge --from ollama:qwen2.5:7b-instruct --to openai:gpt-4o-mini
    """
    from pydantic import ValidationError

    from api.grading.judge_moves import JudgeMoveRequest

    try:
        data = JudgeMoveRequest(from_judge=from_judge, to_judge=to_judge)
    except ValidationError as exc:  # an empty or overlong spec: named by its option
        error = exc.errors(include_url=False)[0]
        hint = _OPTIONS.get(str(error["loc"][0]) if error["loc"] else "")
        raise click.BadParameter(error["msg"], param_hint=hint) from None
    report = _move_remote(server, data) if server is not None else _move_local(data)
    if fmt == "json":
        echo_json(report.model_dump(mode="json"))
        return
    click.echo(
        f"moved {report.moved} pending gradings from {report.from_judge} to {report.to_judge}"
    )
