"""Report tables in a terminal of 80 columns and more: names wrap, never "…", the
interval column is always there, and a table too wide prints in blocks, none of its
columns dropped or cut."""

from __future__ import annotations

import re

from rich.console import Console
from sqlalchemy.engine import Engine

from api.tabular import Tabular, print_table
from storage import Store
from tests.support.gradings import add_many
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key

LONG_AGENT = "stratus-gpt-4o-mini-diagnoser-v2"


def _first_column(text: str) -> list[str]:
    """The pieces of the first column under each table's header rule: a wrapped name is
    its pieces on consecutive lines (lines starting with a space carry none)."""
    pieces: list[str] = []
    under_rule = False
    for line in text.splitlines():
        if line.startswith("─"):
            under_rule = True
        elif not line.strip() or line.startswith("note:"):
            under_rule = False
        elif under_rule and not line[0].isspace():
            pieces.append(re.split(r"\s{2,}", line.rstrip())[0])
    return pieces


async def test_pass_rates_at_80_columns_wrap_names_and_keep_the_interval(
    database_url: str, engine: Engine
) -> None:
    store = Store(engine, key=session_key())
    await add_many(store, {"pass": 19, "fail": 8, "unscored": 1}, agent=LONG_AGENT)
    await add_many(store, {"pass": 21, "fail": 6}, agent="think", provisional=True)
    env = {"NO_COLOR": "1", "COLUMNS": "80", "SRE_JUDGE_DATABASE_URL": database_url}

    done = cli_in_process(
        "report", "pass-rates", "--group-by", "agent", "--inline", "include",
        "--format", "table", env=env,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in done.stdout
    # the interval column is there, in the first block beside n and the rate
    first_block = done.stdout.split("(continued)")[0]
    assert "95% CI" in first_block and "0.515–0.841" in first_block
    row = next(line for line in lines if "0.515–0.841" in line)
    assert " 27 " in row and "0.704" in row
    # the long name wraps onto the next lines, whole, in every block
    names = "".join(_first_column(done.stdout))
    assert names.count(LONG_AGENT) == names.count("think") >= 1
    # and every count is still there, in a later block if need be
    for header in ("passed", "failed", "unscored", "pending", "held", "provisional", "inline"):
        assert header in done.stdout, header


def test_agreement_at_130_columns_keeps_headers_and_figures_whole() -> None:
    columns = [
        "kind", "level", "item", "n", "accuracy", "kappa", "kappa_se", "kappa_ci_low",
        "kappa_ci_high", "yes->yes", "yes->no", "no->yes", "no->no", "kappa_undefined",
    ]  # fmt: skip
    reason = "one category only: rater b always said yes"
    rows = [
        ["judge_human", "verdict", "verdict", 42, 0.881, 0.75, 0.1, 0.55, 0.95, 20, 3, 2, 17, None],
        ["judge_human", "question", "D1-Q1", 42, 0.9, None, None, None, None, 42, 0, 0, 0, reason],
        ["judge_judge", "dimension", "D2", 120, 0.95, 0.8, 0.05, 0.7, 0.9, 60, 3, 3, 54, None],
    ]
    table = Tabular("Agreement", columns, rows, headline=["n", "accuracy", "kappa"])
    console = Console(width=130, no_color=True, record=True)

    print_table(table, console)

    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 130
    header = next(line for line in text.splitlines() if line.startswith("kind"))
    for name in ("kind", "level", "item", "accuracy", "kappa 95% CI", "yes->yes", "no->no"):
        assert name in header, name
    assert "0.550–0.950" in text and "judge_human" in text and "dimension" in text
    assert all(word in text for word in reason.split())  # wrapped in its column, whole
    assert "…" not in text


def test_a_table_too_wide_is_printed_in_blocks_that_repeat_the_names() -> None:
    columns = ["agent", *(f"count_{i}" for i in range(12)), "rate", "ci_low", "ci_high"]
    rows = [["a-very-long-agent-name-indeed", *range(1000, 1012), 0.5, 0.25, 0.75]]
    table = Tabular("Wide", columns, rows, headline=["rate", "ci_low", "ci_high"])
    console = Console(width=80, no_color=True, record=True)

    print_table(table, console)

    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    blocks = text.split("(continued)")
    assert len(blocks) >= 2
    assert "0.250–0.750" in blocks[0]  # the headline figures come first
    assert all(str(1000 + i) in text for i in range(12))  # no column dropped
    pieces = "".join(_first_column(text))
    assert pieces.count("a-very-long-agent-name-indeed") == len(blocks)


_GROUP_VALUES = {
    "agent": "stratus-gpt-4o-mini-diagnoser",
    "model": "gpt-4o-mini-2024",
    "scenario": "k8s/pod-crashloop-misconfig",
    "judge": "openai:qwen2.5-7b-instruct",
    "week": "2025-06-02",
    "rubric": "sregym-rca",
    "source": "scenario",
}
_COUNTS = ["n", "passed", "failed", "unscored", "pending", "held", "provisional", "inline"]


def _pass_rates(keys: list[str]) -> Tabular:
    """A pass-rate table as ``pass_rate_table`` builds it, grouped by ``keys``."""
    return Tabular(
        "Pass rates",
        [*keys, *_COUNTS, "pass_rate", "ci_low", "ci_high"],
        [[*(_GROUP_VALUES[k] for k in keys), 27, 19, 8, 1, 0, 0, 0, 0, 0.704, 0.515, 0.841]],
        headline=["n", "pass_rate", "ci_low", "ci_high"],
    )


def _printed(table: Tabular, width: int = 80) -> str:
    console = Console(width=width, no_color=True, record=True)
    print_table(table, console)
    return console.export_text()


def test_grouped_by_four_keys_the_first_block_holds_n_rate_and_interval() -> None:
    """``report pass-rates --group-by agent,model,scenario,judge`` at 80 columns shows n,
    the rate and its interval in the first block, the names narrowed to make room."""
    text = _printed(_pass_rates(["agent", "model", "scenario", "judge"]))
    first_block = text.split("(continued)")[0]
    assert " 27 " in first_block and "0.704" in first_block
    assert "0.515–0.841" in first_block, first_block
    assert max(len(line) for line in text.splitlines()) <= 80


def test_many_name_columns_keep_every_column_and_every_number_whole() -> None:
    """Grouped by seven keys, the name columns alone wider than 80 columns: every column
    is printed, and n, the rate and the interval whole."""
    keys = ["agent", "model", "scenario", "judge", "week", "rubric", "source"]
    for width in (80, 60):
        text = _printed(_pass_rates(keys), width)
        assert max(len(line) for line in text.splitlines()) <= width
        for whole in ("27", "0.704", "0.515–0.841", *_COUNTS):
            assert whole in text, f"{whole!r} cut or dropped at {width}:\n{text}"
        for header in keys:
            assert header in text, f"column {header!r} dropped at {width}:\n{text}"


def test_an_empty_agreement_table_keeps_every_header() -> None:
    """``report agreement`` with no labels yet, at 80 columns, shows every header."""
    columns = [
        "kind", "level", "item", "n", "accuracy", "accuracy_ci_low", "accuracy_ci_high",
        "kappa", "kappa_se", "kappa_ci_low", "kappa_ci_high",
        "yes->yes", "yes->no", "no->yes", "no->no", "kappa_undefined",
    ]  # fmt: skip
    text = _printed(Tabular("Agreement", columns, [], headline=["n", "accuracy", "kappa"]))
    assert "(no rows" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for header in ("kind", "level", "item", "kappa_se", "no->yes", "no->no", "kappa_undefined"):
        assert header in text, f"header {header!r} dropped:\n{text}"
