"""The problems file of an import names the line it cannot read, however it is broken,
and the entry whose ground truth no submission could send; under
``SRE_JUDGE_INLINE_GROUND_TRUTH=deny`` its ground truths are taken only as registered
scenarios' (its problems registered as scenarios, or a version a registered one had)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.imports.problems import ImportFileError, read_problems
from storage.tables import SubmissionRecord
from tests.imports.jobs import finished, tar_gz
from tests.support.sregym_results import write_sregym_attempt, write_sregym_results

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


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"problem_id": "p1", "ground_truth": "port 9999"}, "unknown key 'ground_truth'"),
        ({"problem_id": "p1", "rootcause": "port 9999"}, "unknown key 'rootcause'"),
        ({"problem_id": "p1", "root_cause": "x", "note": "n"}, "unknown key 'note'"),
        ({"problem_id": "p1"}, "root_cause is missing"),
    ],
    ids=["service-word", "misspelt", "extra", "missing"],
)
def test_an_entry_without_root_cause_or_with_another_key_is_refused(
    tmp_path: Path, entry: dict[str, str], message: str
) -> None:
    """An entry's ``root_cause`` becomes the ground truth of every attempt of its problem:
    one that does not give it (the key misspelt, or written as ``ground_truth``), or
    gives a key besides ``problem_id`` and ``root_cause``, refuses the file naming the
    entry and the key, never registering the problem as a healthy-cluster control. An
    empty or null ``root_cause`` (SREGym leaves a problem's ``root_cause`` None) is one."""
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(entry) + "\n")
    with pytest.raises(ImportFileError, match=re.escape(f"problems.jsonl:1: {message}")):
        read_problems(path)
    controls = [{"problem_id": "p1", "root_cause": ""}, {"problem_id": "p2", "root_cause": None}]
    path.write_text("".join(json.dumps(c) + "\n" for c in controls))
    assert read_problems(path) == {"p1": "", "p2": ""}


def test_a_root_cause_given_twice_is_refused_in_json_lines_as_in_yaml(tmp_path: Path) -> None:
    """An entry that gives ``root_cause`` twice refuses the file in either format, naming
    the entry (in YAML its line), never read as one of its values."""
    as_yaml = tmp_path / "problems.yaml"
    as_yaml.write_text("- problem_id: p1\n  root_cause: 'port 9999'\n  root_cause: 'other'\n")
    with pytest.raises(ImportFileError, match="root_cause"):
        read_problems(as_yaml)
    as_jsonl = tmp_path / "problems.jsonl"
    as_jsonl.write_text('{"problem_id": "p1", "root_cause": "port 9999", "root_cause": "other"}\n')
    with pytest.raises(
        ImportFileError, match=re.escape("problems.jsonl:1: the key 'root_cause' is given twice")
    ):
        read_problems(as_jsonl)


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


def _archive(root: Path, problems_file: Path) -> bytes:
    """An SREGym results archive: the folder's CSV files and its problems file at the top."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}
    return tar_gz({**files, "problems.jsonl": problems_file.read_bytes()})


def _provenance(engine: Engine) -> set[tuple[str, str | None, int | None]]:
    """``(ground_truth_source, scenario_id, scenario_version)`` of the stored submissions."""
    s = SubmissionRecord
    query = select(col(s.ground_truth_source), col(s.scenario_id), col(s.scenario_version))
    with engine.connect() as connection:
        return {(source, sid, version) for source, sid, version in connection.execute(query)}


async def test_under_deny_an_archives_problems_become_registered_scenarios(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """Under ``SRE_JUDGE_INLINE_GROUND_TRUTH=deny`` an SREGym archive's problems file is
    taken as an admin's registration of its problems as scenarios: every attempt is
    stored against the registered scenario of its problem (``ground_truth_source``
    ``scenario``, its version), none as a ground truth of its own."""
    fixture = write_sregym_results(tmp_path)
    admin = await tokens("admin")
    async with api_client(inline_ground_truth="deny") as client:
        body = _archive(fixture.root, fixture.problems_file)
        created = await client.post(
            "/v1/imports", content=body, headers={**admin, "Content-Type": "application/gzip"}
        )
        job = await finished(client, created.headers["location"], admin)
    assert job["state"] == "done" and job["errors"] == [], job
    assert job["report"]["submissions"] == 45
    problems = read_problems(fixture.problems_file)
    assert _provenance(engine) == {("scenario", pid, 1) for pid in problems}


@pytest.mark.parametrize(("policy", "taken"), [("deny", False), ("per_token", True)])
async def test_a_problems_file_truth_no_registered_scenario_had_is_refused_under_deny(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path, policy: str, taken: bool
) -> None:
    """An archive whose problems file gives a registered scenario a ground truth that no
    version of it had brings a ground truth of its own: under ``deny`` each attempt of
    that problem is refused alone, naming its file, line and ``ground_truth`` in the
    API's words, and nothing of it is stored; under ``per_token`` (an import is an
    admin's) it is taken, as before."""
    checklist = [{"id": f"D{d}-Q{q}", "answer": "Yes"} for d in (1, 2, 3) for q in (1, 2, 3)]
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis="geo runs a wrong tag", ground_truth="geo", success=True
    )
    admin = await tokens("admin")
    async with api_client(inline_ground_truth=policy) as client:
        scenario = {"id": "p1", "ground_truth": "the checkout pod ran out of memory"}
        registered = await client.post("/v1/scenarios", json=scenario, headers=admin)
        assert registered.status_code == 201, registered.text
        body = _archive(fixture.root, fixture.problems_file)
        created = await client.post(
            "/v1/imports", content=body, headers={**admin, "Content-Type": "application/gzip"}
        )
        job = await finished(client, created.headers["location"], admin)
    assert job["state"] == "done", job
    if taken:
        assert job["errors"] == [] and _provenance(engine) == {("scenario", "p1", None)}
        return
    assert _provenance(engine) == set(), job["report"]
    [error] = job["errors"]
    where = "2025-06-01_12-00-00/stratus/p1/attempt_1/results.csv:2"
    assert (error["where"], error["field"]) == (where, "ground_truth")
    assert "registered scenarios only" in error["message"]
