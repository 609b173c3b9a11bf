"""Text from outside reaches the terminal inert: agent names, scenario ids, a judge's
evidence and a server's messages never act on the terminal (escape sequences set a
title, write a hyperlink or the clipboard, rewrite what was printed) nor read as rich
markup, in tables, in a grading's rendering and in a command's error line."""

from __future__ import annotations

import io
import json
import re

from rich.console import Console
from sqlalchemy.engine import Engine

from api.cli.render import render_grading
from api.tabular import Tabular, print_table
from api.terminal import terminal_text
from storage import Store
from tests.support.gradings import add_many
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key

#: a title change, a hyperlink written as an escape sequence and as rich markup, a
#: carriage return that would overwrite the line, a C1 control, a right-to-left override
#: and an emoji code (a forged check mark)
HOSTILE = (
    "evil\x1b]0;pwned\x07 \x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"
    " [link=https://evil.example]here[/link] [bold red]loud\rHIDDEN\x9b2J \u202egnp.exe"
    " :white_check_mark: verified"
)


def _terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, color_system="truecolor", width=400), out


def _inert(shown: str) -> None:
    """Nothing in ``shown`` came from the hostile text but its visible characters."""
    assert "\x1b]" not in shown and "\x07" not in shown and "\r" not in shown
    assert "\x9b" not in shown and "\u202e" not in shown
    assert "\\x1b]0;pwned\\x07" in shown and "\\x9b" in shown and "\\u202e" in shown
    assert "[link=https://evil.example]here[/link]" in shown  # printed, not a link
    assert "[bold red]loud" in shown
    assert ":white_check_mark: verified" in shown and "\u2705" not in shown


def test_terminal_text_shows_each_control_as_its_escape_and_keeps_the_rest() -> None:
    assert terminal_text("a\x1b[2Jb\x00c\x7fd\x85e") == "a\\x1b[2Jb\\x00c\\x7fd\\x85e"
    assert terminal_text("\u2066x\u2069 \u202ay") == "\\u2066x\\u2069 \\u202ay"
    assert terminal_text("\u200ea\u200fb\u061cc") == "\\u200ea\\u200fb\\u061cc"
    assert terminal_text("a\nb\tc\u2028d\x1b", one_line=True) == "a\\nb\\tc\\u2028d\\x1b"
    kept = "line one\n\tline two: ünïcödé, 日本語, emoji 🙂, [brackets]"
    assert terminal_text(kept) == kept


def test_a_table_prints_hostile_cells_headers_and_notes_as_plain_text() -> None:
    console, out = _terminal()
    table = Tabular(
        title=f"by agent {HOSTILE}",
        columns=["agent", HOSTILE, "n"],
        rows=[[HOSTILE, HOSTILE, 3]],
        notes=[HOSTILE],
    )
    print_table(table, console)
    _inert(out.getvalue())


def test_a_newline_in_a_name_cannot_forge_a_table_row() -> None:
    """A name's newline is shown as ``\\n``: its cell stays on the record's own row, and
    what follows the newline never reads as a row of figures of its own."""
    forged = "weak-agent\ntrusted-agent       100     1.000  0.963–1.000"
    table = Tabular(
        "Pass rates",
        ["agent", "n", "pass_rate", "ci_low", "ci_high"],
        [[forged, 27, 0.1, 0.05, 0.3]],
        headline=["n", "pass_rate", "ci_low", "ci_high"],
    )
    console = Console(width=160, no_color=True, record=True)
    print_table(table, console)
    lines = console.export_text().splitlines()
    assert not any(line.startswith("trusted-agent") for line in lines), "\n".join(lines)
    assert any(line.startswith("weak-agent\\ntrusted-agent") for line in lines)


def test_a_gradings_evidence_detail_and_judge_name_are_inert() -> None:
    answer = {
        "question_id": "D1-Q1",
        "answer": "yes",
        "judge_answer": "yes",
        "evidence": HOSTILE,
        "evidence_verified": False,
        "evidence_reason": HOSTILE,
        "veto": {"effect": "flagged", "check": "grounding", "reason": HOSTILE},
    }
    grading = {
        "rubric": {"id": "sregym-rca", "version": "v1"},
        "judge": {"backend": "openai", "model": HOSTILE},
        "status": "graded",
        "answers": [answer],
        "held": False,
        "passed": True,
        "dimensions": [{"id": "D1", "yes": 1, "total": 1}],
        "yes_count": 1,
        "composite": 1.0,
        "detail": HOSTILE,
        "needs_review": False,
    }
    console, out = _terminal()
    render_grading(grading, console)
    _inert(out.getvalue())


async def test_a_report_of_a_submitters_agent_name_prints_it_inert(
    database_url: str, engine: Engine
) -> None:
    # an agent name is whatever a submitter sent (up to 200 characters)
    await add_many(Store(engine, key=session_key()), {"pass": 2, "fail": 1}, agent=HOSTILE[:190])
    env = {"COLUMNS": "400", "SRE_JUDGE_DATABASE_URL": database_url, "FORCE_COLOR": "1"}
    done = cli_in_process(
        "report", "pass-rates", "--group-by", "agent", "--format", "table", env=env
    )
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    assert "\x1b]" not in shown and "\r" not in shown and "\u202e" not in shown
    assert "evil\\x1b]0;pwned\\x07" in shown


def test_an_error_quoting_what_the_user_typed_is_inert(database_url: str, engine: Engine) -> None:
    env = {"SRE_JUDGE_DATABASE_URL": database_url}
    done = cli_in_process("regrade", "status", "nope\x1b]0;pwned\x07", env=env)
    assert done.returncode != 0
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr, done.stderr
    assert "nope\\x1b]0;pwned\\x07" in done.stderr, done.stderr


async def test_json_a_command_prints_escapes_what_a_terminal_acts_on(
    database_url: str, engine: Engine
) -> None:
    """JSON leaves C1 controls, bidirectional overrides and U+2028 raw in its strings: a
    command's JSON writes them as ``\\u`` escapes and parses to the same values."""
    agent = "evil\x9b2J\u202eSSAP\u2028next"
    await add_many(Store(engine, key=session_key()), {"pass": 1}, agent=agent)
    env = {"SRE_JUDGE_DATABASE_URL": database_url}
    done = cli_in_process(
        "report", "pass-rates", "--group-by", "agent", "--format", "json", "--inline", "include",
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert agent in json.dumps(json.loads(done.stdout), ensure_ascii=False)
    assert not re.search("[\x80-\x9f\u202a-\u202e\u2028\u2029]", done.stdout), done.stdout[:300]
    assert "\\u009b" in done.stdout and "\\u202e" in done.stdout
