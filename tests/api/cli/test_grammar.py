"""One grammar for the whole command line (issue 16, item 5).

Every command answers ``--help`` with an example; report, export and regrade take the same
filter flags; ``--format`` is the one output flag; ``-`` is stdin or stdout; errors are
one line with exit 2; dry runs store nothing; importing the command line loads neither
the judge backends nor the database or web stack.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from api.cli.main import main
from api.cli.options import FILTER_FLAGS
from storage import make_engine
from storage.regrade.tables import RegradeJobRecord
from storage.tables import AuditRecord


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
