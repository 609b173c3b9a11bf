"""One grammar for the whole command line (issue 16, item 5).

Every command answers ``--help`` with an example; report, export and regrade take the same
filter flags; ``--format`` is the one output flag; ``-`` is stdin or stdout; errors are
one line with exit 2; dry runs store nothing; importing the command line loads neither
the judge backends nor the database or web stack.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from api.cli.main import main
from api.cli.options import FILTER_FLAGS
from storage import make_engine
from storage.regrade.tables import RegradeJobRecord
from storage.tables import AuditRecord

#: the installed command, for the tests that need a process of its own
SRE_JUDGE = str(Path(sys.executable).with_name("sre-judge"))


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, command in sorted(group.commands.items()):
        yield (*path, name)
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def _visible_flags(command: click.Command) -> set[str]:
    return {
        flag
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
        for flag in param.opts
    }


def _count(database_url: str, table: type) -> int:
    """Rows of ``table`` in the database, read with an engine of its own."""

    async def count() -> int:
        engine = make_engine(database_url)
        try:
            with engine.connect() as connection:
                query = select(func.count()).select_from(table)
                return int((connection.execute(query)).one()[0])
        finally:
            engine.dispose()

    return asyncio.run(count())


def _env(database_url: str) -> dict[str, str]:
    return {"SRE_JUDGE_DATABASE_URL": database_url, "SRE_JUDGE_JUDGE": "scripted:pass"}


def test_every_command_answers_help_with_an_example() -> None:
    paths = [(), *_commands(main)]
    assert ("regrade", "status") in paths and ("report", "agreement") in paths
    for path in paths:
        done = CliRunner().invoke(main, [*path, "--help"])
        assert done.exit_code == 0, (path, done.output)
        example = "\n".join(done.output.split("Example:", 1)[1].strip().splitlines()[:3])
        assert "sre-judge" in example, (path, example)


def test_report_export_and_regrade_take_the_same_filter_flags() -> None:
    shared = set(FILTER_FLAGS)
    commands = [
        ("report", "pass-rates"),
        ("report", "questions"),
        ("report", "dimensions"),
        ("report", "tags"),
        ("report", "agreement"),
        ("export",),
        ("regrade",),
    ]
    for path in commands:
        flags = _visible_flags(_command(path))
        assert shared <= flags, (path, shared - flags)
        filter_like = {f for f in flags if f.startswith(("--filter", "--graded", "--created"))}
        assert filter_like == {f for f in shared if f.startswith(("--graded", "--created"))}, path
    # the old spellings still parse, hidden
    regrade = _command(("regrade",))
    hidden = {flag for p in regrade.params if getattr(p, "hidden", False) for flag in p.opts}
    assert {"--filter-agent", "--filter-judge", "--filter-after", "--json"} <= hidden


def test_every_output_flag_is_format() -> None:
    for path in _commands(main):
        command = _command(path)
        visible = _visible_flags(command)
        assert "--json" not in visible and "--csv" not in visible, path


def test_importing_the_command_line_loads_no_backend_database_or_web_stack() -> None:
    heavy = ("sqlalchemy", "litestar", "judge.backends", "openai", "ollama", "storage", "httpx")
    code = (
        "import sys, api.cli.main; "
        f"print([m for m in {heavy!r} if m in sys.modules or "
        "any(k.startswith(m + '.') for k in sys.modules)])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_errors_are_one_line_with_exit_2(tmp_path: Path) -> None:
    env = _env(f"sqlite:///{tmp_path / 'j.db'}")
    for args in (
        ["report", "pass-rates", "--group-by", "nope"],
        ["regrade", "--mode", "sideways"],
        ["export", "--format", "jsonl", "--server", "ftp://nowhere"],
        ["grade", "--ground-truth", "x"],
    ):
        done = CliRunner(env=env).invoke(main, args)
        assert done.exit_code == 2, (args, done.output)
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "Traceback" not in done.output


def test_an_argument_that_is_not_utf8_is_bad_input_named_as_such(tmp_path: Path) -> None:
    """A byte that is not UTF-8 in an argument (a name typed in a Latin-1 terminal,
    carried as a surrogate) is bad input: one line naming the byte, exit 2, nothing
    stored, not an "unexpected" error."""
    env = _env(f"sqlite:///{tmp_path / 'j.db'}")
    done = CliRunner(env=env).invoke(
        main, ["tokens", "create", "--role", "admin", "--name", "caf\udce9"]
    )
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith("error: a value given is not valid UTF-8 text (byte 0xe9")
    assert done.stderr.count("\n") == 1 and "unexpected" not in done.stderr
    listed = CliRunner(env=env).invoke(main, ["tokens", "list"])
    assert json.loads(listed.stdout) == []


@pytest.mark.parametrize(
    "path",
    [("grade", "--ground-truth", "x", "--diagnosis", "y"), ("calibrate",), ("judges", "canary")],
)
def test_a_refused_judge_spec_is_quoted_with_its_password_masked(
    tmp_path: Path, path: tuple[str, ...]
) -> None:
    """A ``--judge`` refused as no judge spec is quoted in the one line of its error with
    its base URL's password masked (``user:***``), as a refused ``SRE_JUDGE_JUDGE`` is."""
    spec = "openai:m@http://user:hunter2secret@127.0.0.1:9/v1"
    env = _env(f"sqlite:///{tmp_path / 'j.db'}")
    done = CliRunner(env=env).invoke(main, [*path, "--judge", spec])
    assert done.exit_code == 2, done.output
    assert "--judge" in done.stderr and "openai:m@http://user:***@127.0.0.1:9/v1" in done.stderr
    assert "hunter2secret" not in done.output


def test_output_a_non_utf8_stdout_cannot_carry_is_one_line_naming_its_encoding(
    tmp_path: Path,
) -> None:
    """Output other than JSON and tables holding a character a stdout that is not UTF-8
    cannot carry ends in one line naming the encoding (exit 2), not a traceback."""
    env = {**_env(f"sqlite:///{tmp_path / 'j.db'}"), "SRE_JUDGE_RUBRIC": "r\u2192x"}
    done = CliRunner(env=env, charset="latin-1").invoke(
        main, ["config", "show", "--format", "table"]
    )
    assert done.exit_code == 2, done.output
    assert done.stderr.startswith("error: stdout's encoding latin-1 cannot write U+2192")
    assert done.stderr.count("\n") == 1


def test_format_defaults_to_json_off_a_terminal_and_json_is_a_deprecated_alias(
    tmp_path: Path,
) -> None:
    env = _env(f"sqlite:///{tmp_path / 'j.db'}")
    plain = CliRunner(env=env).invoke(main, ["config", "show"])
    assert plain.exit_code == 0 and "SRE_JUDGE_JUDGE" in json.loads(plain.stdout)
    table = CliRunner(env=env).invoke(main, ["config", "show", "--format", "table"])
    assert table.stdout.splitlines()[0].split() == ["VARIABLE", "VALUE", "(SOURCE)"]
    old = CliRunner(env=env).invoke(main, ["config", "show", "--json"])
    assert old.exit_code == 0 and json.loads(old.stdout) == json.loads(plain.stdout)
    assert "--json is deprecated; use --format json" in old.stderr


@pytest.mark.slow
def test_tokens_list_has_headers_in_every_format(database_url: str) -> None:
    env = _env(database_url)
    created = CliRunner(env=env).invoke(
        main, ["tokens", "create", "--role", "admin", "--name", "A"]
    )
    assert created.exit_code == 0, created.output
    table = CliRunner(env={**env, "COLUMNS": "200"}).invoke(
        main, ["tokens", "list", "--format", "table"]
    )
    header = next(line for line in table.stdout.splitlines() if "role" in line)
    assert header.split() == ["id", "name", "role", "expires_at", "revoked_at", "grants"]
    csv = CliRunner(env=env).invoke(main, ["tokens", "list", "--format", "csv"])
    assert csv.stdout.splitlines()[0] == "id,name,role,expires_at,revoked_at,grants"
    listed = json.loads(CliRunner(env=env).invoke(main, ["tokens", "list"]).stdout)
    assert [(t["name"], t["role"]) for t in listed] == [("A", "admin")]
    assert created.stdout.strip() not in json.dumps(listed)


@pytest.mark.slow
def test_dash_reads_stdin_and_writes_stdout_and_a_dry_run_stores_nothing(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {**_env(database_url), "SRE_JUDGE_POLL_SECONDS": "0.05"}
    lines = [
        {"diagnosis": f"pod {i} is down", "ground_truth": "g", "agent": "x", "model": "m"}
        for i in range(3)
    ]
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    imported = CliRunner(env=env).invoke(main, ["import", "jsonl", "-"], input=stdin)
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["submissions"] == 3

    audit_rows = _count(database_url, AuditRecord)
    dry = CliRunner(env=env).invoke(
        main, ["regrade", "--judge", "scripted:fail", "--agent", "x", "--dry-run"]
    )
    assert dry.exit_code == 0, dry.output
    job = json.loads(dry.stdout)
    assert (job["state"], job["dry_run"]) == ("done", True)
    assert _count(database_url, RegradeJobRecord) == 0
    assert _count(database_url, AuditRecord) == audit_rows
    status = CliRunner(env=env).invoke(main, ["regrade", "status", job["id"]])
    assert status.exit_code == 2 and "no regrade job" in status.stderr

    exported = CliRunner(env=env).invoke(main, ["export", "--format", "jsonl", "-o", "-"])
    assert exported.exit_code == 0, exported.output
    assert len(exported.stdout.splitlines()) == 3 and "3 gradings exported" in exported.stderr
    assert not (tmp_path / "-").exists()


def _process_env(tmp_path: Path) -> dict[str, str]:
    """A real process's environment, on a database (not made yet) of ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SRE_JUDGE_")}
    return env | {
        "NO_COLOR": "1",
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / 'judge.db'}",
        "SRE_JUDGE_SECRET_KEY": "k" * 48,
    }


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ("tokens", "create", "--role", "admin", "--name", "ci"),
        ("tokens", "list", "--format", "json"),
        ("report", "pass-rates", "--format", "json"),
        ("config", "show", "--format", "json"),
        ("export", "--format", "jsonl", "-o", "-"),
        ("grade", "--ground-truth", "g", "--diagnosis", "d"),
    ],
    ids=["tokens create", "tokens list", "report", "config show", "export", "grade"],
)
def test_a_command_whose_stdout_is_closed_is_refused_before_it_does_anything(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    """A command run with its stdout closed (``>&-``) would print its result (a token
    shown once, a report, an export) nowhere: it is refused in one line naming stdout
    (exit 2) before it does anything, so no token is made, no database either. A real
    process: only there is its stdout really closed."""
    done = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", SRE_JUDGE, *args],
        env=_process_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: stdout is closed: nowhere to write the result")
    assert done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "judge.db").exists()


@pytest.mark.slow
def test_a_command_whose_reader_is_gone_stops_with_the_shells_sigpipe_status(
    tmp_path: Path,
) -> None:
    """A command piped into a reader that is gone (``| head``) stops with 141, the status
    a shell gives a program SIGPIPE ended, and writes nothing more, not even an error
    about the pipe: never 1, which ``submit`` would read as a failed diagnosis."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run(
            [SRE_JUDGE, "config", "show", "--format", "json"],
            env=_process_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=writer,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("group", ["report", "tokens", "audit", "scenarios", "import"])
def test_a_command_group_given_no_command_prints_its_help(group: str) -> None:
    """``sre-judge report`` (any group given no command) prints the group's help as
    ``sre-judge`` alone does, exit 2, not the help squeezed into one escaped line."""
    done = CliRunner().invoke(main, [group])
    assert done.exit_code == 2
    assert "\\n" not in done.output, done.output[:300]
    assert "\nCommands:\n" in done.output, done.output[:300]


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        (
            ("regrade", "--judge", "scripted:fail", "--agent", "caf\u00e9\u2192x", "--dry-run"),
            ("filter", "agent"),
            "caf\u00e9\u2192x",
        ),
        (
            ("gradings", "move-judge", "--from", "ollama:mod\u2192le"),
            ("from_judge",),
            "ollama:mod\u2192le",
        ),
    ],
    ids=["regrade", "gradings move-judge"],
)
def test_json_on_a_latin1_stdout_escapes_what_it_cannot_carry(
    database_url: str,
    engine: Engine,
    args: tuple[str, ...],
    field: tuple[str, ...],
    value: str,
) -> None:
    """JSON on a stdout that is not UTF-8 writes every character past ASCII as a ``\\u``
    escape: a regrade job (and a judge move) naming a character Latin-1 has no byte for
    is printed whole, exit 0, not ended by an encoding error once its work is done."""
    done = CliRunner(env=_env(database_url), charset="latin-1").invoke(
        main, [*args, "--format", "json"]
    )
    assert done.exit_code == 0, done.output
    text = done.stdout_bytes.decode("latin-1")
    assert "\\u2192" in text and text.isascii()
    found = json.loads(text)
    for key in field:
        found = found[key]
    assert found == value
