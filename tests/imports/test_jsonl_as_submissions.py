"""Importing historic runs from JSON lines (``import jsonl``, ``POST /v1/imports``): a line
is taken, screened, checked and queued as a submission to the API would be."""

from __future__ import annotations

import asyncio
import json
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from api.cli.main import main
from api.imports.jsonl import JsonlLine, count_jsonl_items, read_jsonl
from api.imports.problems import ImportProblem
from api.imports.queries import ImportQueries
from judge.backends.scripted import ScriptedBackend
from storage import Store
from storage.tables import GradingRecord, SubmissionRecord
from tests.imports.jobs import finished as _finished
from tests.storage.helpers import JUDGE_SPEC, sregym_rubric

IMPORTS = "/v1/imports"
LINE = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}
LOCAL = "openai:local@http://127.0.0.1:9/v1"
CLOUD = "openai:cloud@http://127.0.0.1:10/v1"
GPT_JUDGE = "openai:gpt-4o-mini@http://127.0.0.1:9/v1"
JSONL = {"Content-Type": "application/x-ndjson"}


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def _judges(engine: Engine) -> dict[str | None, tuple[str, str, str]]:
    with engine.connect() as connection:
        rows = connection.execute(
            select(
                SubmissionRecord.agent,
                GradingRecord.judge_spec,
                GradingRecord.judge_backend,
                GradingRecord.judge_model,
            ).join(GradingRecord, GradingRecord.submission_id == SubmissionRecord.id)
        ).all()
    return {agent: (spec, backend, model) for agent, spec, backend, model in rows}


async def test_imported_lines_are_queued_for_the_services_panel_like_a_submission(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """With a judge panel set, an imported line is queued for the panel, as a
    submission's grading is, never for the single judge."""
    admin = await tokens("admin")
    backends = {LOCAL: ScriptedBackend.for_mode("pass"), CLOUD: ScriptedBackend.for_mode("pass")}
    settings = {"judge": LOCAL, "panel": f"{LOCAL},{CLOUD}", "pending_judge": "pin"}
    async with api_client(backends=backends, **settings) as client:
        live = await client.post("/v1/submissions", json={**LINE, "agent": "live"}, headers=admin)
        assert live.status_code in (201, 202), live.text
        body = (json.dumps({**LINE, "agent": "imported"}) + "\n").encode()
        created = await client.post(IMPORTS, content=body, headers={**admin, **JSONL})
        job = await _finished(client, created.headers["location"], admin)
    assert job["state"] == "done" and job["report"]["queued"] == 1
    judges = _judges(engine)
    assert judges["live"][1] == "panel"
    assert judges["imported"] == judges["live"]


async def test_a_line_of_the_judges_own_family_is_refused_under_self_preference_refuse(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """Under ``SRE_JUDGE_SELF_PREFERENCE=refuse`` a line whose model is of the judge's
    family is refused alone, naming its line and ``model``, as the API refuses it."""
    admin = await tokens("admin")
    backends = {GPT_JUDGE: ScriptedBackend.for_mode("pass")}
    async with api_client(judge=GPT_JUDGE, self_preference="refuse", backends=backends) as client:
        line = {**LINE, "agent": "a", "model": "gpt-4o"}
        live = await client.post("/v1/submissions", json=line, headers=admin)
        assert live.status_code == 422, live.text  # the API's rule
        body = (json.dumps(line) + "\n").encode()
        created = await client.post(IMPORTS, content=body, headers={**admin, **JSONL})
        job = await _finished(client, created.headers["location"], admin)
    assert job["report"]["submissions"] == 0, job["report"]
    assert [(e["where"], e["field"]) for e in job["errors"]] == [("line 1", "model")]


def _inline(engine: Engine) -> int:
    """Submissions stored with a ground truth of their own."""
    query = select(func.count()).select_from(SubmissionRecord)
    inline = query.where(col(SubmissionRecord.ground_truth_source) == "inline")
    with engine.connect() as connection:
        return int(connection.execute(inline).scalar_one())


async def test_a_line_with_its_own_ground_truth_is_refused_under_deny(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """Under ``SRE_JUDGE_INLINE_GROUND_TRUTH=deny`` (registered scenarios only) a line
    carrying its own ``ground_truth`` is refused alone naming its line and
    ``ground_truth``, as the API refuses it even to an admin; nothing of it is queued."""
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass", inline_ground_truth="deny") as client:
        direct = await client.post("/v1/submissions", json=LINE, headers=admin)
        assert direct.status_code == 403, direct.text  # the API's rule
        body = (json.dumps(LINE) + "\n").encode()
        created = await client.post(IMPORTS, content=body, headers={**admin, **JSONL})
        assert created.status_code == 202, created.text
        job = await _finished(client, created.headers["location"], admin)
    assert _inline(engine) == 0, job["report"]
    assert [(e["where"], e["field"]) for e in job["errors"]] == [("line 1", "ground_truth")]
    assert "registered scenarios only" in job["errors"][0]["message"]


@pytest.mark.parametrize(("policy", "taken"), [("deny", False), ("per_token", True)])
def test_import_jsonl_applies_the_inline_ground_truth_policy_as_the_api_does(
    database_url: str, engine: Engine, tmp_path: Path, policy: str, taken: bool
) -> None:
    """``sre-judge import jsonl --strict`` under ``deny`` fails naming ``ground_truth``
    and stores nothing; under ``per_token`` the line is taken, an import being an
    admin's (admins may send their own ground truth there)."""
    path = _write(tmp_path / "h.jsonl", [LINE])
    env = {
        "SRE_JUDGE_DATABASE_URL": database_url,
        "SRE_JUDGE_JUDGE": "scripted:pass",
        "SRE_JUDGE_INLINE_GROUND_TRUTH": policy,
    }
    done = CliRunner(env=env).invoke(main, ["import", "jsonl", str(path), "--strict"])
    assert (done.exit_code == 0) is taken, done.output
    assert _inline(engine) == (1 if taken else 0)
    if not taken:
        assert "ground_truth" in done.stderr and "registered scenarios only" in done.stderr


async def test_a_line_larger_than_the_apis_largest_body_is_refused_alone(
    api_client: Any, tokens: Any
) -> None:
    """A line larger than a request body the API takes (``SRE_JUDGE_MAX_BODY_BYTES``: 413)
    is refused alone, naming its line, whatever field makes it large (here 1 MB of
    ``metadata``, which has no size limit of its own); the other lines are imported."""
    large = {**LINE, "agent": "large", "metadata": {"blob": "x" * 1_000_000}}
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        live = await client.post("/v1/submissions", json=large, headers=admin)
        assert live.status_code == 413, live.text  # the API's rule
        body = "".join(json.dumps(line) + "\n" for line in (large, LINE)).encode()
        created = await client.post(IMPORTS, content=body, headers={**admin, **JSONL})
        job = await _finished(client, created.headers["location"], admin)
    assert job["report"]["submissions"] == 1, job["report"]
    [error] = job["errors"]
    assert error["where"] == "line 1" and "SRE_JUDGE_MAX_BODY_BYTES" in error["message"]


def test_a_line_of_the_largest_body_is_taken_and_a_byte_more_refused(tmp_path: Path) -> None:
    """The limit is the API's: a line of exactly that many bytes (its line ending not
    counted) is read, one a byte larger is refused naming the line."""
    text = json.dumps(LINE)
    path = tmp_path / "h.jsonl"
    path.write_bytes(f"{text}\r\n{text} \n".encode())  # the second a space longer
    taken, refused = list(read_jsonl(path, max_line_bytes=len(text.encode())))
    assert isinstance(taken, JsonlLine)
    assert isinstance(refused, ImportProblem) and refused.where == "line 2", refused


#: the API's largest request body by default (``SRE_JUDGE_MAX_BODY_BYTES``)
MAX_BODY = 256 * 1024


def _one_long_line(path: Path, size: int) -> Path:
    """A JSON array of ``size`` bytes exported on one line, then a good line."""
    with path.open("wb") as out:
        out.write(b'[{"diagnosis": "' + b"x" * size + b'", "ground_truth": "g"}]\n')
        out.write((json.dumps(LINE) + "\n").encode())
    return path


def test_a_line_over_the_limit_is_refused_without_being_held_whole(tmp_path: Path) -> None:
    """A line far larger than the limit (a JSON array of 40 MB exported on one line) is
    refused naming its line and the next line is read, in memory bounded by the limit,
    not by the line."""
    path = _one_long_line(tmp_path / "one-line.jsonl", 40 * 1024 * 1024)
    tracemalloc.start()
    try:
        refused, taken = list(read_jsonl(path, max_line_bytes=MAX_BODY))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert isinstance(refused, ImportProblem) and refused.where == "line 1", refused
    assert f"the line is {40 * 1024 * 1024 + 40} bytes" in refused.message
    assert isinstance(taken, JsonlLine)
    assert peak < 8 * MAX_BODY, f"peak {peak / 1e6:.0f} MB to refuse a 40 MB line"


def test_counting_a_jobs_lines_does_not_hold_a_long_line(tmp_path: Path) -> None:
    """A server's job counts the upload's lines first (its ``total``), in memory bounded
    whatever the longest line."""
    path = _one_long_line(tmp_path / "one-line.jsonl", 40 * 1024 * 1024)
    tracemalloc.start()
    try:
        assert count_jsonl_items(path) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MAX_BODY, f"peak {peak / 1e6:.0f} MB to count a 40 MB line"


async def test_a_byte_that_is_not_utf8_is_refused_naming_its_field_as_the_api_does(
    api_client: Any, tokens: Any
) -> None:
    """A line with a byte that is not UTF-8 in its ``diagnosis`` is refused naming its
    line and ``diagnosis``, as the API refuses the same body naming the field."""
    body = b'{"diagnosis": "the pod \xff ran out of memory", "ground_truth": "g"}'
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        json_type = {"Content-Type": "application/json"}
        direct = await client.post("/v1/submissions", content=body, headers={**admin, **json_type})
        created = await client.post(IMPORTS, content=body + b"\n", headers={**admin, **JSONL})
        job = await _finished(client, created.headers["location"], admin)
    assert direct.status_code == 400, direct.text
    assert direct.json()["errors"][0]["field"] == "diagnosis"  # the API's rule
    assert [(e["where"], e["field"]) for e in job["errors"]] == [("line 1", "diagnosis")]
    assert job["errors"][0]["message"] == "diagnosis: not valid UTF-8 text"


def test_a_compact_iso_created_at_is_that_date_not_seconds_since_1970(tmp_path: Path) -> None:
    """``"created_at": "20240101"`` is ISO 8601's compact date: that date, never
    seconds since 1970; a number is refused naming ``created_at``."""
    path = _write(
        tmp_path / "h.jsonl",
        [{**LINE, "created_at": "20240101"}, {**LINE, "created_at": 20240101}],
    )
    read, number = list(read_jsonl(path))
    assert isinstance(read, JsonlLine)
    assert read.submission.created_utc() == datetime(2024, 1, 1, tzinfo=UTC)
    assert isinstance(number, ImportProblem) and number.field == "created_at", number


def test_a_created_at_is_taken_from_1900_up_to_not_including_9000_in_utc(
    tmp_path: Path,
) -> None:
    """A ``created_at`` is taken from 1900-01-01 up to, not including, 9000-01-01 once in
    UTC (a time written with an offset counts where it lies in UTC); one outside is
    refused naming ``created_at``, the message giving both bounds."""
    taken = ["1900-01-01T00:00:00Z", "8999-12-31T23:59:59Z", "9000-01-01T01:00:00+02:00"]
    refused = ["1899-12-31T23:59:59Z", "9000-01-01T00:00:00Z", "9000-06-01T00:00:00Z"]
    path = _write(tmp_path / "h.jsonl", [{**LINE, "created_at": c} for c in taken + refused])
    read = list(read_jsonl(path))
    assert all(isinstance(r, JsonlLine) for r in read[:3]), read[:3]
    for problem in read[3:]:
        assert isinstance(problem, ImportProblem) and problem.field == "created_at", problem
        assert "from 1900-01-01 up to, not including, 9000-01-01 (UTC)" in problem.message


def test_a_line_without_scenario_or_ground_truth_names_the_field(tmp_path: Path) -> None:
    """A line with neither or both of ``scenario_id`` and ``ground_truth`` is refused
    naming ``scenario_id``, as the API names it."""
    path = _write(
        tmp_path / "h.jsonl",
        [{"diagnosis": "d"}, {**LINE, "scenario_id": "checkout-oom"}],
    )
    read = list(read_jsonl(path))
    assert all(isinstance(r, ImportProblem) for r in read)
    assert [r.field for r in read] == ["scenario_id", "scenario_id"]  # type: ignore[union-attr]


def test_a_key_given_twice_refuses_its_line_naming_the_key(tmp_path: Path) -> None:
    """A line that gives a key twice in one object (two ``ground_truth``s, or one key of
    ``metadata`` twice) is refused alone, naming its line and the key, never read as one
    of its values; the lines around it are taken."""
    good = json.dumps(LINE)
    twice = '{"diagnosis": "d", "ground_truth": "OOM in checkout", "ground_truth": "fine"}'
    nested = '{"diagnosis": "d", "ground_truth": "g", "metadata": {"run": 1, "run": 2}}'
    path = tmp_path / "h.jsonl"
    path.write_text(f"{good}\n{twice}\n{nested}\n{good}\n", encoding="utf-8")
    first, top, inner, last = list(read_jsonl(path))
    assert isinstance(first, JsonlLine) and isinstance(last, JsonlLine)
    assert isinstance(top, ImportProblem) and isinstance(inner, ImportProblem)
    assert (top.where, top.field) == ("line 2", "ground_truth"), top
    assert (inner.where, inner.field) == ("line 3", "metadata.run"), inner
    assert "given twice" in top.message and "given twice" in inner.message


async def test_a_line_may_carry_the_agents_trace_as_a_submission_does(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A line may carry the agent's ``trace``, as a submission does: stored with its
    credentials redacted."""
    steps = [{"tool": "kubectl_get", "input": "pods -A", "output": "checkout OOMKilled"}]
    path = _write(tmp_path / "h.jsonl", [{**LINE, "agent": "a", "trace": steps}])
    report = await ImportQueries(store.db, store.catalog).jsonl(
        read_jsonl(path), rubric=sregym_rubric(), judge=(JUDGE_SPEC, "openai", "judge-model")
    )
    assert [str(p) for p in report.problems] == []
    assert report.submissions == 1
    with engine.connect() as connection:
        [trace] = connection.execute(select(SubmissionRecord.trace)).scalars().all()
    assert trace == steps


async def test_a_password_in_a_lines_trace_is_stored_in_clear_nowhere(
    store: Store, engine: Engine, tmp_path: Path
) -> None:
    """A password found in a line's trace is redacted in its diagnosis too, as in a
    submission's: stored in clear in neither."""
    password = "Zx81pq77wQ"
    steps = [{"tool": "exec", "input": "env", "output": f"DB_PASSWORD={password}"}]
    line = {**LINE, "diagnosis": f"checkout cannot log in with {password}", "trace": steps}
    path = _write(tmp_path / "h.jsonl", [line])
    report = await ImportQueries(store.db, store.catalog).jsonl(
        read_jsonl(path), rubric=sregym_rubric(), judge=(JUDGE_SPEC, "openai", "judge-model")
    )
    assert report.submissions == 1
    with engine.connect() as connection:
        [(diagnosis, trace)] = connection.execute(
            select(SubmissionRecord.diagnosis, SubmissionRecord.trace)
        ).all()
    assert diagnosis == "checkout cannot log in with [REDACTED:secret-keyword]"
    assert password not in json.dumps(trace), trace


async def _graded(client: Any, agent: str, headers: dict[str, str]) -> dict[str, Any]:
    """The grading of ``agent``'s submission once it is no longer pending (15 s)."""
    for _ in range(300):
        page = (await client.get("/v1/gradings", params={"agent": agent}, headers=headers)).json()
        items = page.get("items", page.get("gradings", []))
        if items and items[0]["status"] != "pending":
            return dict(items[0])
        await asyncio.sleep(0.05)
    raise AssertionError(f"{agent}'s grading was not graded: {page}")


async def test_an_imported_diagnosis_is_screened_as_a_submitted_one(
    api_client: Any, tokens: Any
) -> None:
    """An imported diagnosis is screened as a submitted one (on the text as sent:
    markers that normalizing would hide count), so it gets the same review reasons."""
    key = "AKIA" + "IOSFODNN7EXAMPLE"
    hidden = "".join(chr(ord(c) + 0xFEE0) if c.isalnum() else c for c in key)
    diagnosis = f"The checkout pod\u200b ran out of memory; the key {hidden} leaked"
    line = {"diagnosis": diagnosis, "ground_truth": "OOM in checkout"}
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        live = await client.post(
            "/v1/submissions?wait=10", json={**line, "agent": "live"}, headers=admin
        )
        assert live.status_code == 201, live.text
        body = (json.dumps({**line, "agent": "imported"}) + "\n").encode()
        created = await client.post(IMPORTS, content=body, headers={**admin, **JSONL})
        job = await _finished(client, created.headers["location"], admin)
        assert job["report"]["queued"] == 1, job
        imported = await _graded(client, "imported", admin)
    assert "injection_suspected" in live.json()["review_reasons"]
    assert sorted(imported["review_reasons"]) == sorted(live.json()["review_reasons"])
