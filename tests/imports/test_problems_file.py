"""The problems file of an import names the line it cannot read, however it is broken,
and the entry whose ground truth no submission could send."""

from __future__ import annotations

import json
import re
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


@pytest.mark.parametrize(
    ("root_cause", "message"),
    [
        ("wrong \x00 port", "root_cause contains NUL bytes"),
        ("\ud800 lone", "root_cause is not valid UTF-8"),
        ("x" * 70_000, "root_cause is 70000 bytes, over the limit of 65536"),
    ],
    ids=["nul", "lone-surrogate", "too-long"],
)
def test_a_root_cause_no_submission_could_send_refuses_the_file(
    tmp_path: Path, root_cause: str, message: str
) -> None:
    """A root cause becomes the ground truth of every attempt of its problem: one a
    submission could not send is refused, naming its entry, before anything is stored."""
    path = tmp_path / "problems.jsonl"
    good = json.dumps({"problem_id": "a", "root_cause": "x"})
    path.write_text(f"{good}\n{json.dumps({'problem_id': 'b', 'root_cause': root_cause})}\n")
    with pytest.raises(ImportFileError, match=re.escape(f"problems.jsonl:2: {message}")):
        read_problems(path)


def test_a_problem_given_twice_differently_is_refused_however_its_id_is_spaced(
    tmp_path: Path,
) -> None:
    """An id is taken without its surrounding spaces: ``" p1 "`` is ``p1`` again."""
    path = tmp_path / "problems.jsonl"
    first = {"problem_id": "p1", "root_cause": "A"}
    again = {"problem_id": " p1 ", "root_cause": "B"}
    path.write_text(f"{json.dumps(first)}\n{json.dumps(again)}\n")
    with pytest.raises(ImportFileError, match=r"problems\.jsonl:2: problem 'p1' is given twice"):
        read_problems(path)
    path.write_text(f"{json.dumps(first)}\n{json.dumps({**again, 'root_cause': 'A'})}\n")
    assert read_problems(path) == {"p1": "A"}


def test_a_root_cause_holding_unicode_line_breaks_is_one_line(tmp_path: Path) -> None:
    """JSON strings may hold U+2028 or U+0085 unescaped: a line is cut at a newline
    only, so such a root cause is read whole and the next line keeps its number."""
    lines = [
        {"problem_id": "a", "root_cause": "the port\u2028moved"},
        {"problem_id": "b", "root_cause": "the pod\x85restarted"},
    ]
    path = tmp_path / "problems.jsonl"
    path.write_text("\r\n".join(json.dumps(x, ensure_ascii=False) for x in lines), "utf-8")
    problems = read_problems(path)
    assert [problems[k] for k in ("a", "b")] == ["the port\u2028moved", "the pod\x85restarted"]


@pytest.mark.parametrize(
    ("problem_id", "message"),
    [
        ("inline:geo", "may not start with 'inline:'"),
        ("hotel/versions", "may not end with /versions"),
        ("hotel//user-port", "segments of letters, digits"),
        ("hotel/../user-port", "segments of letters, digits"),
        ("hotel/", "segments of letters, digits"),
        ("user port", "segments of letters, digits"),
    ],
)
def test_a_problem_id_no_scenario_may_have_refuses_the_file(
    tmp_path: Path, problem_id: str, message: str
) -> None:
    """Each problem is registered as the scenario of its id: an id the scenario routes
    refuse (``inline:`` is how an SREGym export names a self-supplied ground truth) is
    refused, naming its entry, before anything is stored."""
    path = tmp_path / "problems.jsonl"
    good = json.dumps({"problem_id": "hotel/user-port", "root_cause": "x"})
    path.write_text(f"{good}\n{json.dumps({'problem_id': problem_id, 'root_cause': 'y'})}\n")
    with pytest.raises(ImportFileError, match=re.escape("problems.jsonl:2: problem_id")) as err:
        read_problems(path)
    assert message in str(err.value)
