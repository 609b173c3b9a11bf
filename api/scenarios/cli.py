"""``sre-judge scenarios``: load a scenario dataset (JSON Lines or YAML), list it.

Loading is idempotent: the same file again changes nothing and says ``unchanged`` for
every scenario; a changed ground truth becomes a new version, the old one kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from api.cli.edge import load_settings, run, service_runtime, with_store
from api.cli.options import default_format, deprecated, format_option
from api.cli.output import echo_json
from api.terminal import terminal_text

if TYPE_CHECKING:
    from api.scenarios.schemas import ScenarioLoadReport

__all__ = ["scenarios_group"]

_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
}


@click.group("scenarios")
def scenarios_group() -> None:
    """Registered scenarios: their ground truths, versions and sets.

    \b
    Example:
      sre-judge scenarios load problems.yaml
      sre-judge scenarios list --set held-out
    """


@scenarios_group.command("load")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--input-format",
    "input_fmt",
    type=click.Choice(["jsonl", "json", "yaml"]),
    help="the file's format (default: by its suffix, .jsonl, .json or .yaml, else by its content)",
)
@click.option(
    "--format",
    "fmt",
    # jsonl and yaml: the old meaning (the file's format), still taken, deprecated
    type=click.Choice(["table", "json", "jsonl", "yaml"]),
    metavar="[table|json]",
    help="output format (default: table on a terminal, else json)",
)
@click.option("--json", "legacy_json", is_flag=True, hidden=True)
def scenarios_load(file: Any, input_fmt: str | None, fmt: str | None, legacy_json: bool) -> None:
    """Create or update scenarios from FILE (``-`` for stdin), one transaction.

    Each item is ``{id, ground_truth, title?, tags?, set?, note?}``. The whole file is
    checked before the database is opened: a bad item is refused naming FILE and the
    item's place in it, and nothing is stored, created or migrated.

    \b
    Example:
      printf '{"id": "hotel/user-port", "ground_truth": "...", "set": "public"}\\n' \\
        | sre-judge scenarios load -
    """
    from api.scenarios.loading import parse_scenarios
    from api.scenarios.use_cases import store_scenarios
    from api.service.errors import InvalidRequest
    from api.service.principal import Principal
    from judge.errors import InputError

    if fmt in ("jsonl", "yaml"):
        deprecated(f"--format {fmt}", f"--input-format {fmt}")
        input_fmt, fmt = input_fmt or fmt, None
    if legacy_json:
        deprecated("--json", "--format json")
        fmt = fmt or "json"
    fmt = fmt or default_format(("table", "json"))
    name = getattr(file, "name", "-")
    input_fmt = input_fmt or _SUFFIXES.get(Path(str(name)).suffix.lower())
    try:
        text = file.read()
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise click.BadParameter(f"{name}: line {line}: not UTF-8", param_hint="FILE") from None
    max_bytes = load_settings().max_text_bytes
    try:  # a file that cannot be loaded changes nothing: refused before the database opens
        items = parse_scenarios(text, fmt=input_fmt, max_bytes=max_bytes)  # type: ignore[arg-type]
    except (InvalidRequest, InputError) as exc:  # the detail says the item or line at fault
        raise click.BadParameter(f"{name}: {exc}", param_hint="FILE") from None

    async def action() -> ScenarioLoadReport:
        async with service_runtime() as services:
            cli = Principal(id="cli", name="cli", role="admin")
            return await store_scenarios(services, cli, items)

    report = run(action())
    if fmt == "json":
        echo_json(report.model_dump(mode="json"), indent=2)
        return
    for item in report.items:
        changed = f" ({', '.join(item.changed)})" if item.changed else ""
        row = f"{item.outcome:<12} {item.id}  version {item.version}{changed}"
        click.echo(terminal_text(row, one_line=True))
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(report.counts.items()))
    click.echo(f"{len(report.items)} scenarios: {counts}", err=True)


@scenarios_group.command("list")
@click.option("--set", "scenario_set", help="only scenarios of this set, e.g. held-out")
@click.option("--id-prefix", help="only ids starting with this")
@format_option("table", "json", legacy_json=True)
def scenarios_list(scenario_set: str | None, id_prefix: str | None, fmt: str) -> None:
    """List scenarios in id order with their set and newest version (json: one object a line).

    \b
    Example:
      sre-judge scenarios list --set public --id-prefix hotel/
    """
    from api.scenarios.queries import ScenarioFilter, ScenarioQueries
    from storage import Store

    filters = ScenarioFilter(scenario_set=scenario_set, id_prefix=id_prefix)

    async def listing(store: Store) -> list[Any]:
        rows, cursor = await ScenarioQueries(store.db).page(filters, limit=500)
        while cursor is not None:
            more, cursor = await ScenarioQueries(store.db).page(filters, after=cursor, limit=500)
            rows += more
        return rows

    rows = with_store(listing)
    if fmt == "json":
        for r in rows:
            fields = {"id": r.id, "set": r.scenario_set, "version": r.version, "title": r.title}
            echo_json(fields)
        return
    click.echo(f"{'id':<40} {'set':<12} {'version':>7}  title")
    for r in rows:
        row = f"{r.id:<40} {r.scenario_set:<12} {r.version:>7}  {r.title}"
        click.echo(terminal_text(row, one_line=True))
    if not rows:
        click.echo("no scenarios", err=True)
