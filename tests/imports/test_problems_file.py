"""The problems file of an import names the line it cannot read, however it is broken."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.imports.problems import ImportFileError, read_problems

NESTED = "[" * 100_000 + "]" * 100_000
BROKEN = '{"problem_id": "a", "root_cause": "x"}\n{"problem_id": \n'


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("problems.jsonl", BROKEN, "problems.jsonl:2: not valid JSON"),
        ("problems.jsonl", f"\n{NESTED}", "problems.jsonl:2: not valid JSON: nested too deeply"),
        ("problems.yaml", NESTED, "not valid YAML"),
    ],
    ids=["json", "nested-json", "nested-yaml"],
)
def test_an_unreadable_problems_file_names_its_fault(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportFileError, match=message):
        read_problems(path)
