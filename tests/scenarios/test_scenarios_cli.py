"""``sre-judge scenarios load FILE|-`` and ``list`` as a user runs them (in process)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from sqlalchemy.engine import Engine

from storage import Store
from tests.support.gradings import TRUTH, add_many
from tests.support.in_process_cli import cli_in_process
from tests.support.keys import session_key

ITEMS = [
    {"id": "hotel/user-port", "ground_truth": "[fault_spec] component=pod/user", "set": "public"},
    {"id": "healthy", "ground_truth": "", "set": "held-out", "title": "control"},
]  # fmt: skip


def _cli(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": url, "SRE_JUDGE_JUDGE": "scripted:pass"}
    return cli_in_process(*args, env=env, input=stdin)


def test_loading_a_file_twice_then_a_fix_from_stdin(database_url: str, tmp_path: Path) -> None:
    dataset = tmp_path / "scenarios.yaml"
    dataset.write_text(yaml.safe_dump(ITEMS))
    first = _cli(database_url, "scenarios", "load", str(dataset), "--format", "table")
    again = _cli(database_url, "scenarios", "load", str(dataset))  # JSON off a terminal
    fixed = dict(ITEMS[0], ground_truth="[fault_spec] component=deployment/user-service")
    stdin = _cli(
        database_url, "scenarios", "load", "-", "--format", "table",
        stdin=json.dumps(fixed) + "\n",
    )  # fmt: skip
    bad = _cli(database_url, "scenarios", "load", "-", stdin='{"id": "x"}\n')
    listed = _cli(database_url, "scenarios", "list", "--set", "public", "--json")
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [
        "created", "hotel/user-port", "version", "1", "created", "healthy", "version", "1",
    ]  # fmt: skip
    assert json.loads(again.stdout)["counts"] == {"unchanged": 2} and not again.stderr.count(
        "warning"
    )
    assert stdin.stdout.split() == ["new_version", "hotel/user-port", "version", "2"]
    assert bad.returncode == 2 and "FILE: <stdin>: item 1: ground_truth" in bad.stderr
    # the old spellings still work, each with a warning: --format for the file, --json
    old = _cli(
        database_url, "scenarios", "load", "-", "--format", "yaml", "--json",
        stdin=yaml.safe_dump(ITEMS[1:]),
    )  # fmt: skip
    assert old.returncode == 0 and json.loads(old.stdout)["counts"] == {"unchanged": 1}
    assert "--input-format yaml" in old.stderr and "--format json" in old.stderr
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {"id": "hotel/user-port", "set": "public", "version": 2, "title": ""}
    ]


async def test_report_and_export_take_scenario_set(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    store = Store(engine, key=session_key())
    await store.catalog.create_scenario(
        id="held/1", ground_truth=TRUTH, scenario_set="held-out", actor="tests"
    )
    await add_many(store, {"pass": 2, "fail": 1}, scenario_id="held/1")
    await add_many(store, {"pass": 3}, scenario_id="pub/1")
    report = _cli(
        database_url, "report", "pass-rates", "--scenario-set", "held-out", "--format", "json"
    )
    export = _cli(
        database_url,
        "export",
        "--format",
        "jsonl",
        "--scenario-set",
        "default",
        "-o",
        str(tmp_path / "e.jsonl"),
    )
    assert report.returncode == 0, report.stderr
    overall = json.loads(report.stdout)["overall"]
    assert (overall["n"], overall["passed"]) == (3, 2)
    assert export.returncode == 0, export.stderr
    assert len((tmp_path / "e.jsonl").read_text().splitlines()) == 3


def test_a_title_with_line_breaks_lists_on_its_own_line(database_url: str, tmp_path: Path) -> None:
    """A listing is one scenario a line: a title's newline, tab or line separator is shown
    as its escape, never as a line that looks like another scenario."""
    forged = {
        "id": "hotel/a",
        "ground_truth": "[fault_spec] component=pod/a",
        "title": "a\nhotel/forged                             public             1  fake\u2028x\ty",
    }
    dataset = tmp_path / "scenarios.yaml"
    dataset.write_text(yaml.safe_dump([forged]))
    assert _cli(database_url, "scenarios", "load", str(dataset)).returncode == 0
    listed = _cli(database_url, "scenarios", "list", "--format", "table")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.split("\n")[:-1]  # str.split: only newlines end a line
    assert header.startswith("id") and row.startswith("hotel/a")
    assert row.endswith(
        "a\\nhotel/forged                             public             1  fake\\u2028x\\ty"
    )
    as_json = _cli(database_url, "scenarios", "list", "--json")  # JSON: the title as it is
    assert json.loads(as_json.stdout)["title"] == forged["title"]


def test_a_file_that_is_not_utf8_is_named_with_its_line(database_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "scenarios.jsonl"
    bad.write_bytes(b'{"id": "a", "ground_truth": "x"}\n{"id": "b", "ground_truth": "\xff"}\n')
    done = _cli(database_url, "scenarios", "load", str(bad))
    assert done.returncode == 2 and "unexpected" not in done.stderr, done.stderr
    assert "FILE" in done.stderr and "scenarios.jsonl: line 2: not UTF-8" in done.stderr


def test_a_ground_truth_over_the_size_limit_is_named_with_its_line(
    database_url: str, tmp_path: Path
) -> None:
    """A ground truth over ``SRE_JUDGE_MAX_TEXT_BYTES`` is refused (exit 2) naming the
    file and its line, as any bad item is."""
    dataset = tmp_path / "scenarios.jsonl"
    big = {"id": "b", "ground_truth": "x" * 2000}
    dataset.write_text(json.dumps(ITEMS[0]) + "\n" + json.dumps(big) + "\n", encoding="utf-8")
    env = {
        "NO_COLOR": "1",
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_MAX_TEXT_BYTES": "1024",
    }
    done = cli_in_process("scenarios", "load", str(dataset), env=env)
    assert done.returncode == 2, done.stderr
    assert "FILE" in done.stderr and "scenarios.jsonl: line 2: ground_truth is" in done.stderr


def test_a_json_file_loads_as_the_bulk_route_takes_it(database_url: str, tmp_path: Path) -> None:
    """A ``.json`` file (one object or a list, pretty-printed, with JSON's escapes) loads
    as ``POST /v1/scenarios:bulk`` takes ``application/json``; without a telling suffix
    the content says it is JSON."""
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"id": "a", "ground_truth": TRUTH}, indent=2))
    many = tmp_path / "many.txt"
    many.write_text(json.dumps([{"id": "b/c", "ground_truth": TRUTH + " \U0001f600"}], indent=2))
    first = _cli(database_url, "scenarios", "load", str(one), "--format", "json")
    second = _cli(database_url, "scenarios", "load", str(many), "--format", "json")
    forced = _cli(
        database_url, "scenarios", "load", "-", "--input-format", "json", "--format", "json",
        stdin=json.dumps({"id": "d", "ground_truth": TRUTH}),
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert forced.returncode == 0, forced.stderr
    assert json.loads(second.stdout)["counts"] == {"created": 1}
    assert json.loads(second.stdout)["items"][0]["id"] == "b/c"


def test_a_byte_order_mark_is_no_part_of_a_load(database_url: str, tmp_path: Path) -> None:
    """Editors on Windows start UTF-8 files with a byte order mark: it is ignored."""
    path = tmp_path / "scenarios.jsonl"
    line = json.dumps({"id": "bom/one", "ground_truth": TRUTH}) + "\n"
    path.write_bytes(b"\xef\xbb\xbf" + line.encode())
    loaded = _cli(database_url, "scenarios", "load", str(path), "--format", "json")
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout)["counts"] == {"created": 1}


def test_a_key_given_twice_in_a_file_loads_nothing(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    """A YAML mapping or a JSON Lines object giving a key twice is refused (exit 2), naming
    FILE, the item, the key and, in YAML, the line; nothing is stored."""
    as_yaml = tmp_path / "scenarios.yaml"
    as_yaml.write_text("- id: a\n  ground_truth: port 9999\n  ground_truth: port 8086\n")
    as_lines = tmp_path / "scenarios.jsonl"
    as_lines.write_text(
        '{"id": "a", "ground_truth": "t"}\n{"id": "b", "id": "c", "ground_truth": "t"}\n'
    )
    by_yaml = _cli(database_url, "scenarios", "load", str(as_yaml))
    by_lines = _cli(database_url, "scenarios", "load", str(as_lines))
    listed = _cli(database_url, "scenarios", "list", "--json")
    assert by_yaml.returncode == by_lines.returncode == 2, (by_yaml.stderr, by_lines.stderr)
    assert "FILE" in by_yaml.stderr and "line 3, column 3" in by_yaml.stderr
    assert "scenarios.yaml: item 1: the key 'ground_truth'" in by_yaml.stderr
    assert "scenarios.jsonl: line 2: the key 'id'" in by_lines.stderr
    assert listed.returncode == 0 and listed.stdout.strip() == ""


def test_a_bad_file_is_refused_before_anything_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that does not load is refused (exit 2, one line naming FILE) before the
    database is opened: run in a folder with no database (a typo, the wrong folder), the
    refusal leaves the folder as it was, with no empty ``sre-judge.db`` and no new
    service key."""
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "scenarios.yaml"
    bad.write_text(": : :\n", encoding="utf-8")
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("SRE_JUDGE_")}
    env |= {"NO_COLOR": "1", "SRE_JUDGE_SECRET_KEY_FILE": str(tmp_path / "keys" / "k.key")}
    done = cli_in_process("scenarios", "load", str(bad), env=env)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: Invalid value for FILE: ") and "scenarios.yaml: not YAML" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scenarios.yaml"]
