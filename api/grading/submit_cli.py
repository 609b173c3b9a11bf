"""``sre-judge submit``: send diagnoses to a running server; the exit status is the verdict.

Usable as a CI gate on an agent's output. It talks to the server through the client
package (``sre_judge_client``, imported when the command runs, so nothing of the server
stack or of httpx loads with the command line).

Exit status: 0 pass, 1 fail, 2 bad usage (or a request the server refused: token, scenario,
fields, a redirect), 3 unscored, 4 held (a pass of a diagnosis flagged for injection,
waiting for a human verdict: not a pass), 5 no verdict yet (still pending after
``--wait``, or the server unreachable: no connection, 502, 503, 504); interrupted 130,
its output's reader gone 141 (``api.cli.edge``): no verdict. With several
diagnoses (JSONL) the most serious status wins, in the order 2, 3, 5, 4, 1, 0, and every
error names its line (``line 3: ...``), whether the line could not be read or sent or the
server refused it; a line refused does not keep the others from being sent. ``--wait`` is
the time given to each grading in all (:func:`sre_judge_client.client.submit_and_wait`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from api.cli.options import FiniteFloatRange, format_option
from api.terminal import terminal_text
from judge.inputs import json_lines

__all__ = ["EXIT_CODES", "submit_command"]

#: the exit status of each outcome, and the order in which several outcomes combine
EXIT_CODES = {"usage": 2, "unscored": 3, "pending": 5, "held": 4, "fail": 1, "pass": 0}
#: the fields of a JSONL line that are a string or null
_TEXT_FIELDS = ("scenario_id", "ground_truth", "agent", "model", "run_id")
_FIELDS = ("diagnosis", *_TEXT_FIELDS, "attempt", "metadata")


class _Unsendable(ValueError):
    """A JSONL line that is no submission; the message says why."""


def outcome(grading: dict[str, Any]) -> str:
    """``pass``, ``fail``, ``held``, ``unscored`` or ``pending`` for a grading object; a
    graded one without a verdict (as earlier imports stored some) is ``unscored``, as
    every view reads it, never a fail."""
    if grading["status"] == "unscored":
        return "unscored"
    if grading["status"] != "graded":
        return "pending"
    if grading.get("held"):
        return "held"
    if grading.get("passed") is None:
        return "unscored"
    return "pass" if grading["passed"] else "fail"


def worst(outcomes: list[str]) -> int:
    """The exit status of several outcomes: the first of :data:`EXIT_CODES`' order seen."""
    for name in EXIT_CODES:
        if name in outcomes:
            return EXIT_CODES[name]
    return EXIT_CODES["usage"]  # nothing submitted


def _read(path: str) -> str:
    """The file's text (``-``: stdin), a byte order mark dropped as ``import jsonl``
    drops it; text that is not UTF-8 is a usage error naming the line of the first bad
    byte."""
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise click.UsageError(f"{path}: line {line}: not UTF-8 ({error.reason})") from None


def _requests(
    text: str, jsonl: bool, defaults: dict[str, Any]
) -> list[tuple[str, dict[str, Any] | str]]:
    """The submissions to send, each with where it came from (``line N`` of a JSONL
    file, else empty): one diagnosis, or one JSON object a line. A line that is no
    submission comes as the reason why instead, so the other lines are still sent."""
    if not jsonl:
        return [("", {**defaults, "diagnosis": text})]
    items: list[tuple[str, dict[str, Any] | str]] = []
    for number, line in enumerate(json_lines(text), start=1):
        if not line.strip():
            continue
        try:
            items.append((f"line {number}", _line_request(line, defaults)))
        except _Unsendable as error:
            items.append((f"line {number}", str(error)))
    if not items:
        raise click.UsageError("no submission: the JSONL input holds no line")
    return items


def _no_constant(name: str) -> Any:
    """``parse_constant`` of a JSONL line: ``NaN`` and ``Infinity``, which Python writes
    for a float that JSON has no number for, are no JSON (no request could carry them)."""
    raise ValueError(f"{name} is no JSON number")


def _line_request(line: str, defaults: dict[str, Any]) -> dict[str, Any]:
    """The submission a JSONL line gives, over the command line's ``defaults``; raises
    :class:`_Unsendable` for a line that is not JSON, or not an object with a
    ``diagnosis`` string and known fields of their types (the field named)."""
    try:
        item = json.loads(line, parse_constant=_no_constant)
    except ValueError as error:
        raise _Unsendable(f"not JSON ({error})") from error
    except RecursionError:
        raise _Unsendable("not JSON (nested too deeply)") from None
    if not isinstance(item, dict) or not isinstance(item.get("diagnosis"), str):
        raise _Unsendable("an object with a 'diagnosis' string expected")
    unknown = set(item) - set(_FIELDS)
    if unknown:
        raise _Unsendable(f"unknown field(s) {sorted(unknown)}")
    for name in _TEXT_FIELDS:
        if not isinstance(item.get(name), str | None):
            raise _Unsendable(f"[{name}] a string or null expected")
    attempt = item.get("attempt")
    if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int)):
        raise _Unsendable("[attempt] an integer or null expected")
    base = dict(defaults)
    if "scenario_id" in item or "ground_truth" in item:  # the line says where its truth is
        base.pop("scenario_id", None)
        base.pop("ground_truth", None)
    return {**base, **item}


def _submit_one(client: Any, request: dict[str, Any], wait: float) -> dict[str, Any]:
    from sre_judge_client.client import submit_and_wait

    fields = {k: v for k, v in request.items() if v is not None}
    grading = submit_and_wait(client, wait=wait, **fields)
    # what the server sent: a submitter's view leaves fields out, not null
    return dict(grading.model_dump(mode="json", exclude_unset=True))


def _send(
    client: Any, where: str, request: dict[str, Any] | str, wait: float
) -> str | dict[str, Any]:
    """The grading of one submission, or its outcome (``usage``, ``pending``) when it
    gets none, its error printed naming ``where`` it came from. ``request`` as
    :func:`_requests` gives it: a line that is no submission is refused without a request,
    and so is one no request could carry (an error of the client's own), so one line
    never keeps the others from being sent."""
    import httpx
    from sre_judge_client import ApiError, Unavailable

    prefix = f"error: {where}: " if where else "error: "
    if isinstance(request, str):
        click.echo(terminal_text(f"{prefix}{request}", one_line=True), err=True)
        return "usage"
    try:
        return _submit_one(client, request, wait)
    except ApiError as error:
        click.echo(terminal_text(f"{prefix}{error}", one_line=True), err=True)
        return "pending" if _transient(error, Unavailable) else "usage"
    except (httpx.HTTPError, OSError, TimeoutError) as error:
        said = f"{prefix}{type(error).__name__}: {error}"
        click.echo(terminal_text(said, one_line=True), err=True)
        return "pending"
    except Exception as error:  # this line only: refused, the others still sent
        said = f"{prefix}{type(error).__name__}: {error}"
        click.echo(terminal_text(said, one_line=True), err=True)
        return "usage"


def _transient(error: Exception, unavailable: type[Exception]) -> bool:
    """A refusal worth sending again later (exit 5): the server or its gateway busy or
    away. A 429 naming a field (the attempt limit on ``scenario_id``) refuses this
    request for its whole window: a refusal (exit 2), like any other field at fault."""
    return isinstance(error, unavailable) and getattr(error, "field", None) is None


def _show(grading: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(grading, separators=(",", ":")))
        return
    from api.cli.output import stdout_console
    from api.cli.render import render_grading, render_submitter_view

    console = stdout_console()
    if grading["status"] != "graded" and grading["status"] != "unscored":
        console.print(f"grading {grading['id']}: [bold]{grading['status'].upper()}[/bold]")
        return
    console.print(f"grading {grading['id']}")
    if grading.get("view", "full") == "full":
        render_grading(grading, console)
    else:
        render_submitter_view(grading, console)


@click.command("submit")
@click.option("--scenario", "scenario_id", help="the registered scenario's id")
@click.option(
    "--ground-truth-file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="send the ground truth inline instead of a scenario id",
)
@click.option(
    "--diagnosis-file",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="the diagnosis ('-' for stdin); a .jsonl file (or --jsonl) holds many",
)
@click.option("--jsonl", is_flag=True, help="the file holds one JSON submission a line")
@click.option("--agent", help="the agent's name")
@click.option("--model", help="the agent's model")
@click.option("--run-id", help="the run: with --attempt, resubmitting never grades twice")
@click.option("--attempt", type=click.IntRange(min=0), help="the attempt within the run")
@click.option(
    "--wait",
    type=FiniteFloatRange(min=0),
    default=60.0,
    show_default=True,
    help="seconds to wait for the grading (0: do not wait)",
)
@click.option("--url", envvar="SRE_JUDGE_URL", help="the server [env SRE_JUDGE_URL]")
@click.option("--token", envvar="SRE_JUDGE_TOKEN", help="an API token [env SRE_JUDGE_TOKEN]")
@format_option("table", "json", legacy_json=True)
def submit_command(
    scenario_id: str | None,
    ground_truth_file: str | None,
    diagnosis_file: str,
    jsonl: bool,
    wait: float,
    url: str | None,
    token: str | None,
    fmt: str,
    **metadata: Any,
) -> None:
    """Submit diagnoses to a running server and print their gradings.

    Exit 0 pass, 1 fail, 2 usage, 3 unscored, 4 held for a human, 5 no verdict yet
    (130 interrupted, 141 the output's reader gone: no verdict).
    --format json prints one grading object a line.

    \b
    Example:
      sre-judge submit --scenario checkout/oom --diagnosis-file diagnosis.txt --wait 120
    """
    as_json = fmt == "json"
    from sre_judge_client import Client

    jsonl = jsonl or diagnosis_file.endswith(".jsonl")
    if ground_truth_file == "-" and diagnosis_file == "-":
        raise click.UsageError("only one of the files can be read from stdin")
    truth = _read(ground_truth_file) if ground_truth_file else None
    if not jsonl and (scenario_id is None) == (truth is None):
        raise click.UsageError("give exactly one of --scenario and --ground-truth-file")
    defaults = {"scenario_id": scenario_id, "ground_truth": truth, **metadata}
    requests = _requests(_read(diagnosis_file), jsonl, defaults)
    outcomes: list[str] = []
    try:
        client = Client(url, token)
    except ValueError as error:  # a URL no request goes to, a token no header carries
        raise click.UsageError(f"--url/--token: {error}") from None
    with client:
        for where, request in requests:
            grading = _send(client, where, request, wait)
            if isinstance(grading, str):
                outcomes.append(grading)
                continue
            _show(grading, as_json)
            outcomes.append(outcome(grading))
    sys.exit(worst(outcomes))
