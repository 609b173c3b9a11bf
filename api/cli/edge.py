"""The command line's edge: settings from the environment and domain errors as exit statuses.

Every command runs its coroutine through :func:`run`, which maps the errors of the use
cases and of the layers below to click's exceptions in one table: a request that cannot
be carried out as given, or names a record that does not exist, is bad usage (exit 2,
naming the option at fault), a conflicting record a failure (exit 1). Errors are one line
on stderr, never a traceback (:class:`OneLineGroup`; ``SRE_JUDGE_DEBUG=1`` shows it).
"""

from __future__ import annotations

import codecs
import errno
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import click

from api.cli.database import (
    database_present,
    require_database,
    require_migrated,
    require_newest_or_none,
)
from api.terminal import terminal_text

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from api.service.services import Services
    from api.service.settings import Settings
    from storage import Store
    from storage.keys import ServiceKey

__all__ = [
    "CommandError",
    "CommandFailed",
    "CommandInterrupted",
    "OneLineGroup",
    "as_click_error",
    "check_service_key",
    "load_settings",
    "run",
    "service_runtime",
    "upgrade_with_key",
    "with_store",
]

T = TypeVar("T")
ExitTable = tuple[tuple[type[Exception], type[click.ClickException]], ...]


class CommandError(click.ClickException):
    """Bad usage or input shown as one line on stderr (``error: ...``), exit 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        """One line on stderr."""
        click.echo(f"error: {terminal_text(self.format_message(), one_line=True)}", err=True)


class CommandFailed(CommandError):
    """The work itself failed (a database that does not answer, a conflict): the same one
    line, exit 1."""

    exit_code = 1


class CommandInterrupted(CommandError):
    """The command was interrupted (Ctrl-C, SIGINT): the same one line, exit 130, as the
    shell gives for SIGINT; none of a command's own statuses."""

    exit_code = 130


#: the exit status when stdout's reader is gone: the shell's for SIGPIPE (128 + 13)
_STDOUT_GONE = 141


class OneLineGroup(click.Group):
    """The root group: every error of a command is one line on stderr, never a traceback.

    Usage errors keep exit 2 and name the command's help; any other error a command
    raised on purpose keeps its exit status (1: the work failed) and is written the same
    way, ``error: ...``; an unexpected error is exit 2 with its type and message
    (``SRE_JUDGE_DEBUG=1`` lets the traceback through). A command group given no command
    prints its help, as ``sre-judge`` alone does. A command run with its stdout closed
    (``>&-``) is refused before it does anything (exit 2): its result would go nowhere.
    A signal's ending is the shell's status for that signal, none of a command's own (nor
    of ``submit``'s verdicts): interrupted (Ctrl-C, SIGINT), ``error: interrupted`` and
    130; stdout's reader gone (a broken pipe), 141 and nothing more written.
    """

    def invoke(self, ctx: click.Context) -> Any:
        """Invoke the command, turning its errors into :class:`CommandError`."""
        if sys.stdout is None:  # fd 1 closed: a file opened later could even take it
            raise CommandError(
                "stdout is closed: nowhere to write the result (redirect it to a file or "
                "/dev/null instead)"
            )
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            where = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            raise CommandError(exc.format_message() + where) from None
        except CommandError:
            raise
        except click.ClickException as exc:  # click's own "Error: ..." is not this grammar
            kind = CommandFailed if exc.exit_code == 1 else CommandError
            raise kind(exc.format_message()) from None
        except (click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise CommandInterrupted("interrupted") from None
        except UnicodeEncodeError as exc:
            if os.environ.get("SRE_JUDGE_DEBUG"):
                raise
            raise CommandError(_encoding_fault(exc)) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # the reader is gone: nothing to tell it
                _drop_stdout()
                raise click.exceptions.Exit(_STDOUT_GONE) from None
            if os.environ.get("SRE_JUDGE_DEBUG"):
                raise
            raise CommandError(f"{exc}") from None
        except Exception as exc:
            if os.environ.get("SRE_JUDGE_DEBUG"):
                raise
            raise CommandError(f"unexpected {type(exc).__name__}: {exc}") from None


def _drop_stdout() -> None:
    """Point stdout's descriptor at the null device once its reader is gone, so that what
    is still buffered is dropped at exit rather than met as another broken pipe (which
    Python reports on stderr, ending the process with 120)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError):  # not a descriptor (a test's runner): nothing buffered
        pass


def _encoding_fault(exc: UnicodeEncodeError) -> str:
    """What a text that could not be encoded says: an argument (or a file) whose bytes
    are not UTF-8, carried as surrogates (PEP 383) into text that must be UTF-8, is bad
    input; a character stdout's encoding cannot carry (output that is not a table nor
    JSON, which escape it) names that encoding."""
    if exc.reason == "surrogates not allowed":
        return (
            "a value given is not valid UTF-8 text "
            f"(byte {_undecoded_byte(exc)} in {exc.object[:60]!r})"
        )
    stdout = getattr(sys.stdout, "encoding", None)
    if stdout and _codec(stdout) == _codec(exc.encoding):
        return (
            f"stdout's encoding {stdout} cannot write {_undecoded_byte(exc)}: "
            "set PYTHONIOENCODING=utf-8 (or a UTF-8 locale)"
        )
    return f"unexpected UnicodeEncodeError: {exc}"


def _codec(encoding: str) -> str:
    """The codec's own name for ``encoding`` (``ascii`` for ``ANSI_X3.4-1968``)."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return encoding


def _undecoded_byte(exc: UnicodeEncodeError) -> str:
    """The first byte a surrogate of ``exc`` stands for, as ``0xff``; the first
    character of another ``exc``, as ``U+2192``."""
    point = ord(exc.object[exc.start])
    return f"0x{point - 0xDC00:02x}" if 0xDC80 <= point <= 0xDCFF else f"U+{point:04X}"


def _exit_table() -> ExitTable:
    """Error class -> click exception class; the first matching class in order wins.

    Built when an error is mapped, so that ``--help`` does not import the storage stack.
    """
    from api.service.errors import ServiceError
    from judge.errors import InputError, JudgeSpecError, RubricError
    from storage.audit import CheckpointError
    from storage.errors import (
        Conflict,
        InvalidCursor,
        InvalidReview,
        NotFound,
        PreconditionFailed,
        SchemaMismatch,
    )

    return (
        (ServiceError, CommandError),
        (InputError, CommandError),
        (JudgeSpecError, CommandError),
        (RubricError, CommandError),
        (InvalidCursor, CommandError),
        (InvalidReview, CommandError),
        (NotFound, CommandError),
        (PreconditionFailed, click.ClickException),
        (Conflict, click.ClickException),
        (CheckpointError, click.ClickException),
        (SchemaMismatch, click.ClickException),
    )


@asynccontextmanager
async def service_runtime(
    *, workers: bool = False, existing: bool = False
) -> AsyncIterator[Services]:
    """The service's runtime on the configured database, workers if asked.

    Without ``existing`` a database never migrated (or not there) gets the newest schema
    first. ``existing``: for commands that work on what is stored, refuse a database
    that is not there or was never migrated, rather than create an empty one. Either
    way a database at an older revision is refused, never upgraded under the
    deployment's servers and workers (as ``worker`` does: only ``serve`` and ``migrate``
    upgrade a deployment's schema).

    The runtime's loops (grading workers, batch runner, webhooks) log as the service's
    do (:func:`_command_logging`).
    """
    from api.service.runtime import Runtime

    settings = load_settings()
    _command_logging(settings)
    if existing:
        await require_migrated(settings.database_url)
    else:  # before the runtime makes a key
        await require_newest_or_none(settings.database_url)
    try:
        runtime = Runtime(settings, workers=workers, migrate=not existing, create_key=not existing)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    async with runtime:
        yield runtime.services


def _command_logging(settings: Settings) -> None:
    """Log a command's own runtime as the service logs: every line scrubbed of secrets and
    inert for a terminal (:func:`~api.service.observability.configure_logging`).

    A command's output is what it prints: unless ``SRE_JUDGE_LOG_LEVEL`` says otherwise
    it logs warnings and errors only, and unless ``SRE_JUDGE_LOG_FORMAT`` says otherwise
    as text lines on a terminal (JSON lines elsewhere). A process whose logging is set
    up already (``serve``, ``worker``, a program running the command's code) keeps it,
    as :func:`logging.basicConfig` would.
    """
    import logging
    import sys

    from api.service.observability import configure_logging

    if logging.getLogger().handlers:
        return
    chosen = settings.model_fields_set
    defaults: dict[str, str] = {}
    if "log_level" not in chosen:
        defaults["log_level"] = "WARNING"
    if "log_format" not in chosen and sys.stderr.isatty():
        defaults["log_format"] = "text"
    configure_logging(settings.model_copy(update=defaults))


def with_store(work: Callable[[Store], Awaitable[T]], *, migrate: bool = False) -> T:
    """Run ``work`` on a store over the configured database.

    For the commands that need the records only, not the judges or the workers. With
    ``migrate`` (the commands that write) a database never migrated gets the newest
    schema first; without it the database must exist and be migrated
    (``api.cli.database``). Either way the database must be at this code's newest
    revision: an older one is refused, never upgraded under the deployment's servers
    and workers, nor read with queries its schema cannot answer.
    """
    from api.webhooks.outbox import subscribe as subscribe_outbox
    from storage import Store, make_engine

    settings = load_settings()
    if not migrate:  # a reading command: never create an empty database (nor a key)
        require_database(settings.database_url)

    async def on_store() -> T:
        if migrate:
            await upgrade_with_key(settings, new_only=True)
        else:
            await require_migrated(settings.database_url)
        engine = make_engine(settings.database_url)
        try:
            # a reading command changes nothing: it makes no key either
            store = Store(engine, key=database_key(settings, engine, create=migrate))
            subscribe_outbox(store.db)  # as the runtime's store: no event's webhook is lost
            return await work(store)
        finally:
            engine.dispose()

    return run(on_store())


async def upgrade_with_key(settings: Settings, *, new_only: bool = False) -> None:
    """Upgrade the database to the newest schema once the service key that will write to
    it is checked, or made where the database has none yet (:func:`check_service_key`):
    a refused key leaves no schema behind. ``new_only`` (the commands that write; only
    ``serve`` and ``migrate`` upgrade): make the schema of a database never migrated,
    and refuse one at an older revision, before any key is made."""
    import asyncio

    from storage import upgrade

    if new_only:
        await require_newest_or_none(settings.database_url)
    await asyncio.to_thread(check_service_key, settings)
    await upgrade(settings.database_url, new_only=new_only)


def check_service_key(settings: Settings) -> None:
    """Bad usage, before any schema is made or upgraded, for a service key the process
    would refuse once started: on a database whose audit log is keyed, a key that is
    missing or is not that one; otherwise a given key (``SRE_JUDGE_SECRET_KEY``, or a key
    file that exists) that is too short or unreadable, or a key file that cannot be made.
    For the processes that make a key (``serve``, the commands that write): the key file
    that is not there yet is made here, as the runtime would make it moments later, so
    one that cannot be made leaves no schema behind. A SQLite file that is not there is
    not opened (that would create it)."""
    from storage import make_engine
    from storage.audit import newest_key_id

    if database_present(settings.database_url):
        engine = make_engine(settings.database_url)
        try:
            if newest_key_id(engine) is not None:  # no audit log yet: not keyed
                database_key(settings, engine, create=False)
                return
        finally:
            engine.dispose()
    service_key(settings, create=True)  # the audit log is not keyed yet


def database_key(settings: Settings, engine: Engine, *, create: bool) -> ServiceKey:
    """The service key the database's audit log is keyed with (made, with ``create``, on
    a database that has none yet); bad usage when it is missing or another key."""
    from api.service.secret_key import MissingServiceKey, key_for_database

    try:
        return key_for_database(settings, engine, create=create)
    except MissingServiceKey as exc:
        raise click.UsageError(str(exc)) from None


def service_key(settings: Settings, *, create: bool) -> ServiceKey:
    """The service key of ``settings``; bad usage when it is missing or unreadable."""
    from api.service.secret_key import MissingServiceKey, load_service_key

    try:
        return load_service_key(settings, create=create)
    except MissingServiceKey as exc:
        raise click.UsageError(str(exc)) from None


def load_settings(**overrides: object) -> Settings:
    """The settings from the environment, with the options given; bad usage when invalid."""
    from pydantic import ValidationError

    from api.service.settings import Settings, mask_passwords

    try:
        settings = Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
    except ValidationError as exc:  # one line, each fault named by its variable
        faults = "; ".join(_setting_fault(error) for error in exc.errors(include_url=False))
        raise click.UsageError(f"invalid configuration: {faults}") from None
    except ValueError as exc:  # the error quotes the value: a URL's password masked
        raise click.UsageError(f"invalid configuration: {mask_passwords(str(exc))}") from None
    _check_built_judges(settings)
    return settings


def _check_built_judges(settings: Settings) -> None:
    """Bad usage, naming the variable, for a judge the service would fail to build when it
    starts: a scripted judge of an unknown mode (a spec's grammar takes any model; the
    tests give scripted judges of their own, the command line never does)."""
    from judge.spec import SCRIPTED_MODES, parse_judge_spec

    named = [
        ("SRE_JUDGE_JUDGE", settings.judge),
        ("SRE_JUDGE_CONFIRM_JUDGE", settings.confirm_judge),
    ]
    named += [("SRE_JUDGE_PANEL", spec) for spec in settings.panel_specs or []]
    for variable, spec in named:
        if spec is None:
            continue
        parsed = parse_judge_spec(spec)
        if parsed.backend == "scripted" and parsed.model not in SCRIPTED_MODES:
            modes = "|".join(SCRIPTED_MODES)
            raise click.UsageError(
                f"invalid configuration: {variable}: scripted judge mode {parsed.model!r} is "
                f"unknown (scripted:{modes})"
            )


def _setting_fault(error: Mapping[str, Any]) -> str:
    """One fault of the settings as a line's part: ``SRE_JUDGE_<FIELD>: what is wrong``,
    the value it quotes with its credentials masked. A database URL's fault quotes it
    masked already (:func:`~api.service.settings.mask_url`: its password hidden, its
    role shown); masked again, its user alone would read as a token and be hidden."""
    from api.service.settings import mask_passwords

    message = " ".join(str(error.get("msg", "invalid")).split())
    message = message.removeprefix("Value error, ")  # pydantic's, of a validator's error
    loc = tuple(error.get("loc", ()))
    if loc != ("database_url",):
        message = mask_passwords(message)
    location = "_".join(str(part) for part in loc)
    return f"SRE_JUDGE_{location.upper()}: {message}" if location else message


def as_click_error(exc: Exception) -> click.ClickException | None:
    """The click exception (and so the exit status) of a domain error, or None."""
    if isinstance(exc, click.ClickException):
        return exc
    from sqlalchemy.exc import DBAPIError

    if isinstance(exc, DBAPIError):
        said = " ".join(str(exc.orig).split())  # a driver's message spans lines
        return click.ClickException(
            f"cannot read the database ({type(exc.orig).__name__}: {said}); "
            "is it reachable at SRE_JUDGE_DATABASE_URL, and migrated (`sre-judge migrate`)?"
        )
    for kind, click_error in _exit_table():
        if isinstance(exc, kind):
            field = getattr(exc, "field", None)
            message = getattr(exc, "detail", None) or str(exc)
            # a domain error may quote what a user, a file or a server sent: inert text
            return click_error(terminal_text(f"{field}: {message}" if field else message))
    return None


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine; domain errors become click's exceptions (exit 1 or 2).
    A grading that failed on a fault of the service's own is reported as that fault (its
    type and message: the command's user gave whatever text it may quote)."""
    import asyncio

    try:
        return asyncio.run(coroutine)
    except Exception as exc:
        from judge.grader import GradingFailed

        error = exc.error if isinstance(exc, GradingFailed) else exc
        mapped = as_click_error(error)
        if mapped is not None:
            raise mapped from None
        if error is exc:
            raise
        raise error from None
