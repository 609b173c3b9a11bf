"""The command line's grammar: the one output flag, the shared filter flags, ``--server``.

Also what the report commands share (group keys, arms, charts, emitting a table).

The commands read the database of ``SRE_JUDGE_DATABASE_URL`` directly (no server
needed). scipy and matplotlib are imported only when a command runs.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from api.cli.output import emit

__all__ = [
    "FILTER_FLAGS",
    "FORMATS",
    "Instant",
    "NamedValue",
    "as_utc",
    "default_format",
    "deprecated",
    "emit",
    "filter_options",
    "format_option",
    "server_option",
]

Command = Callable[..., Any]
#: the one output flag's values
FORMATS = ("table", "json", "csv")


#: the shared filter flags of report, export and regrade: flag -> (filter key, help)
FILTER_FLAGS: dict[str, tuple[str, str]] = {
    "--agent": ("agent", "only this agent"),
    "--model": ("model", "only this (agent's) model"),
    "--scenario": ("scenario_id", "only this scenario id"),
    "--run": ("run_id", "only this run id"),
    "--graded-rubric": ("rubric", "only gradings by this rubric: id or id@version"),
    "--graded-judge": ("judge", "only gradings by this judge: backend:model (reports: or model)"),
    "--created-after": ("created_after", "created on or after this time (UTC)"),
    "--created-before": ("created_before", "created before this time (UTC)"),
    "--ground-truth-source": (
        "ground_truth_source",
        "only registered scenarios' ground truths (scenario) or submitters' (inline)",
    ),
    "--scenario-set": ("scenario_set", "only scenarios of this set, e.g. held-out"),
}
_TIMES = ("created_after", "created_before")
#: what reports and exports also take: which gradings count (not a filter of regrades)
SCOPE_FLAGS: dict[str, tuple[str, list[str], str]] = {
    "--include": (
        "include",
        ["shadow"],
        "also the gradings of shadow regrades (newest per submission and judge)",
    ),
    "--provisional": (
        "provisional",
        ["include", "exclude", "only"],
        "gradings of judges not yet qualified: counted and marked (default), left out, or alone",
    ),
    "--inline": (
        "inline",
        ["apart", "include"],
        "gradings against their submitters' own ground truths: counted apart (reports' "
        "default) or mixed in",
    ),
}


if TYPE_CHECKING:  # generic in click's stubs; click 8.1's class is not subscriptable
    _ParamType = click.ParamType[datetime, Any]
    _TextType = click.ParamType[str, Any]
else:
    _ParamType = _TextType = click.ParamType


class Instant(_ParamType):
    """A time as the API takes one, read by the API's parser
    (:func:`~api.service.request_types.parse_datetime_text`): ISO 8601 / RFC 3339
    (``2026-01-31``, ``2026-01-31T12:00:00Z``, an offset, fractions of a second, a leap
    second), UTC without a zone; converted to an aware UTC datetime kept within the stored
    years, as the API keeps a filter's bounds
    (:func:`~api.service.request_types.bounded_date`)."""

    name = "time"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> datetime:
        """The aware UTC datetime ``value`` names; a usage error saying the form if none."""
        # here: loading the command line loads no database stack
        from api.service.request_types import bounded_date, parse_datetime_text

        if isinstance(value, datetime):
            return bounded_date(value)
        try:
            parsed = parse_datetime_text(str(value).strip())
        except ValueError:
            self.fail(
                f"{value!r} is not an ISO 8601 time (e.g. 2026-01-31 or 2026-01-31T12:00:00Z)",
                param,
                ctx,
            )
        return bounded_date(parsed)


#: filter keys whose value, given blank, names nothing any grading or scenario has: a
#: judge, a rubric, a scenario set (an agent or a run id imported as "" may be stored)
_NAMING = ("rubric", "judge", "scenario_set")


class NamedValue(_TextType):
    """A filter value that names something: given blank (``--graded-judge ""``, as
    ``"$JUDGE"`` with ``JUDGE`` unset gives) it names nothing and is refused naming the
    option; only a flag left out means "any"."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        """``value``, or a usage error naming the option when it is blank."""
        text = str(value)
        if not text.strip():
            self.fail("given empty, it names nothing (leave the option out for any)", param, ctx)
        return text


def _filter_type(key: str) -> click.ParamType[Any, Any] | None:
    if key in _TIMES:
        return Instant()
    if key == "ground_truth_source":
        return click.Choice(["scenario", "inline"])
    if key in _NAMING:
        return NamedValue()
    return None


def deprecated(old: str, new: str) -> None:
    """Say on stderr that ``old`` still works but ``new`` is its name now."""
    click.echo(f"warning: {old} is deprecated; use {new}", err=True)


def filter_options(
    *, aliases: dict[str, str] | None = None, scope: bool = False
) -> Callable[[Command], Command]:
    """The shared filter flags (:data:`FILTER_FLAGS`); the command gets ``filters``, a dict.

    ``filters`` holds the given flags only, by filter key, times as aware UTC datetimes.
    ``aliases`` (old flag -> filter key) are hidden deprecated names kept for scripts;
    ``scope`` adds :data:`SCOPE_FLAGS` (reports and exports: shadow and provisional).
    """
    aliases = aliases or {}
    scoped = SCOPE_FLAGS if scope else {}

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            filters: dict[str, Any] = {}
            for old, key in aliases.items():
                value = kwargs.pop(_alias_dest(old), None)
                if value not in (None, ()):
                    deprecated(old, _flag_of(key))
                    filters[key] = value
            for key in [k for k, _ in FILTER_FLAGS.values()] + [k for k, _, _ in scoped.values()]:
                value = kwargs.pop(f"filter_{key}", None)
                if value is not None:
                    filters[key] = value
            for key in _TIMES:
                filters[key] = as_utc(filters.get(key))
            return command(*args, filters={k: v for k, v in filters.items() if v is not None},
                           **kwargs)  # fmt: skip

        for old, key in reversed(aliases.items()):
            wrapper = click.option(old, _alias_dest(old), type=_filter_type(key), hidden=True)(
                wrapper
            )
        for flag, (key, choices, help_text) in reversed(scoped.items()):
            wrapper = click.option(
                flag, f"filter_{key}", type=click.Choice(choices), help=help_text
            )(wrapper)
        for flag, (key, help_text) in reversed(FILTER_FLAGS.items()):
            wrapper = click.option(flag, f"filter_{key}", type=_filter_type(key), help=help_text)(
                wrapper
            )
        return wrapper

    return decorate


def _alias_dest(flag: str) -> str:
    return "alias_" + flag.lstrip("-").replace("-", "_")


def _flag_of(key: str) -> str:
    return next(flag for flag, (k, _) in FILTER_FLAGS.items() if k == key)


def default_format(choices: Sequence[str]) -> str:
    """``table`` when stdout is a terminal (and the command has tables), else ``json``."""
    if "table" in choices and sys.stdout.isatty():
        return "table"
    return "json" if "json" in choices else choices[0]


def format_option(*choices: str, legacy_json: bool = False) -> Callable[[Command], Command]:
    """``--format`` (the one output flag); the command gets ``fmt`` resolved to a choice.

    ``legacy_json`` keeps the old ``--json`` flag as a hidden, deprecated alias.
    """
    names = list(choices or FORMATS)

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def wrapper(*args: Any, fmt: str | None = None, **kwargs: Any) -> Any:
            if kwargs.pop("legacy_json", False):
                deprecated("--json", "--format json")
                fmt = fmt or "json"
            return command(*args, fmt=fmt or default_format(names), **kwargs)

        if legacy_json:
            wrapper = click.option("--json", "legacy_json", is_flag=True, hidden=True)(wrapper)
        auto = "table on a terminal, else json" if "table" in names else names[0]
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(names),
            default=None,
            help=f"output format (default: {auto})",
        )(wrapper)

    return decorate


def server_option(command: Command) -> Command:
    """``--server URL``: ask a running server (token from SRE_JUDGE_TOKEN), not the database."""
    return click.option(
        "--server",
        metavar="URL",
        help="ask this sre-judge server instead of the database (token: SRE_JUDGE_TOKEN)",
    )(command)


def as_utc(value: datetime | None) -> datetime | None:
    """A time given on the command line without a zone is UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def checked_judge(spec: str, option: str = "--judge") -> str:
    """``spec`` when it is a judge spec (``BACKEND:MODEL[@BASE_URL]``); bad usage naming
    ``option`` otherwise, before anything is opened or written. The error quotes the
    spec with its base URL's credentials masked, as a refused setting's error does."""
    from judge.masking import mask_passwords
    from judge.spec import parse_judge_spec

    try:
        parse_judge_spec(spec)
    except ValueError as exc:
        raise click.BadParameter(mask_passwords(str(exc)), param_hint=option) from None
    return spec


def checked_rubric(rubric_id: str, rubric_dir: Any, option: str = "--rubric") -> str:
    """``rubric_id`` when the rubric folder has it; bad usage naming ``option`` and the
    known rubrics otherwise, before anything is opened or written."""
    from judge.rubric import load_rubric_dir

    rubrics = load_rubric_dir(rubric_dir)
    if rubric_id not in rubrics:
        known = ", ".join(sorted(rubrics)) or "none"
        raise click.BadParameter(
            f"unknown rubric {rubric_id!r}; known rubrics: {known}", param_hint=option
        )
    return rubric_id


class FiniteFloatRange(click.FloatRange):
    """A number in a range, never NaN nor infinite: ``nan`` compares false with every
    bound, so a plain range takes it (``--drift-threshold nan`` would turn a gate off)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or a usage error naming the option."""
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
