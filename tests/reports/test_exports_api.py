"""Exports over HTTP: whole or a problem, never a 200 that stops short (issue 19, item 8)."""

from __future__ import annotations

import ast
import asyncio
import base64
import csv
import hashlib
import io
import json
import re
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from sqlalchemy.engine import Engine

from api.http.app import create_app
from api.reports import export_routes as exports_route
from api.service.settings import Settings
from judge.rubric import DEFAULT_RUBRIC_DIR
from storage import Store
from tests.imports.jobs import finished, tar_gz
from tests.imports.partial import import_partial_checklist
from tests.support.exports import fail_exports_after
from tests.support.gradings import add_many
from tests.support.keys import session_key
from tests.support.service_process import free_port
from tests.support.sregym_driver import IDS, RUN, diagnosed, write_run
from tests.support.sregym_results import write_sregym_attempt, write_sregym_results
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

EXPORTS = "/v1/exports/gradings"
_TAR = {"Content-Type": "application/gzip"}


def _rows(fmt: str, body: bytes) -> int:
    text = body.decode("utf-8")
    if fmt == "jsonl":
        return len([json.loads(line) for line in text.splitlines()])
    return len(list(csv.DictReader(io.StringIO(text))))


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "sregym"])
async def test_a_complete_export_states_its_length_rows_and_sha256(
    api_client: Any, tokens: Any, engine: Engine, fmt: str
) -> None:
    await add_many(
        Store(engine, key=session_key()), {"pass": 3, "fail": 2, "unscored": 1}, agent="a"
    )
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        response = await client.get(EXPORTS, params={"format": fmt}, headers=admin)
    assert response.status_code == 200, response.text
    body = response.content
    assert int(response.headers["content-length"]) == len(body)
    assert "chunked" not in response.headers.get("transfer-encoding", "")
    assert int(response.headers["x-export-rows"]) == _rows(fmt, body) == 6
    digest = base64.b64encode(hashlib.sha256(body).digest()).decode()
    assert response.headers["repr-digest"] == f"sha-256=:{digest}:"


@pytest.mark.parametrize("fmt", ["jsonl", "sregym"])
async def test_an_export_failing_midway_is_a_problem_not_a_short_200(
    api_client: Any,
    tokens: Any,
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 5}, agent="a")
    admin = await tokens("admin")
    fail_exports_after(monkeypatch, 3)
    async with api_client(start_workers=False) as client:
        response = await client.get(EXPORTS, params={"format": fmt}, headers=admin)
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["title"] == "Export failed"
    assert "after 3 gradings" in problem["detail"] and "OperationalError" in problem["detail"]
    assert "x-export-rows" not in response.headers and "repr-digest" not in response.headers


async def test_an_export_failing_before_its_first_row_is_a_problem_too(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 1}, agent="a")
    admin = await tokens("admin")
    fail_exports_after(monkeypatch, 0)
    async with api_client(start_workers=False) as client:
        response = await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
    assert response.status_code == 500 and response.json()["title"] == "Export failed"


async def test_a_connection_cut_while_sending_is_an_error_for_an_http_client(
    engine: Engine, tokens: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last window, sending the written export, is framed by Content-Length (uvicorn
    keeps it, no chunking): a server that stops short leaves the client an error."""
    await add_many(Store(engine, key=session_key()), {"pass": 3}, agent="a")
    admin = await tokens("admin")

    async def first_chunk_only(source: Any) -> AsyncIterator[bytes]:
        yield source.read(100)
        raise OSError("disk gone")

    settings = Settings(database_url=database_url, judge="scripted:pass")
    app = create_app(settings, engine=engine, backends={}, start_workers=False)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    serving = asyncio.create_task(server.serve())
    try:
        for _ in range(200):  # up to 10 s
            if server.started:
                break
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            whole = await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
            assert whole.status_code == 200 and "transfer-encoding" not in whole.headers
            assert int(whole.headers["content-length"]) == len(whole.content) > 100
            monkeypatch.setattr(exports_route, "read_chunks", first_chunk_only)
            with pytest.raises(httpx.RemoteProtocolError):
                await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
    finally:
        server.should_exit = True
        await serving


def _sregym_archive(tmp_path: Path) -> bytes:
    fixture = write_sregym_results(tmp_path)
    entries = {
        p.relative_to(fixture.root).as_posix(): p.read_bytes() for p in fixture.root.rglob("*.csv")
    }
    entries["problems.jsonl"] = fixture.problems_file.read_bytes()
    return tar_gz(entries)


async def _imported_sregym(client: Any, admin: dict[str, str], tmp_path: Path) -> None:
    """The SREGym results fixture uploaded through ``POST /v1/imports``, its job done."""
    created = await client.post(
        "/v1/imports",
        content=_sregym_archive(tmp_path),
        headers={**admin, "Content-Type": "application/gzip"},
    )
    job = await finished(client, created.headers["location"], admin)
    assert job["state"] == "done", job


async def test_a_jsonl_export_line_is_the_grading_object_the_api_shows(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """``jsonl`` is one grading object per line, the API's: an imported SREGym verdict
    (rubric version ``sregym``, no stored rubric) was exported with its dimensions
    named ``D1`` where the API reads it with the current rubric (``Fault localization``)."""
    admin = await tokens("admin")
    async with api_client() as client:
        await _imported_sregym(client, admin, tmp_path)
        exported = await client.get(
            "/v1/exports/gradings", params={"format": "jsonl"}, headers=admin
        )
        assert exported.status_code == 200
        first = json.loads(exported.text.splitlines()[0])
        shown = (await client.get(f"/v1/gradings/{first['id']}", headers=admin)).json()
    differing = sorted(k for k in set(first) | set(shown) if first.get(k) != shown.get(k))
    assert differing == [], (differing, first["dimensions"], shown["dimensions"])


async def test_the_per_grading_sregym_csv_names_an_imported_verdicts_dimensions(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """``format=sregym`` writes ``Diagnosis.dimensions`` with the dimensions' names, as
    SREGym does and as the grading object shows them; an imported SREGym verdict
    (rubric version ``sregym``, read with the current rubric) is no exception."""
    admin = await tokens("admin")
    async with api_client() as client:
        await _imported_sregym(client, admin, tmp_path)
        exported = await client.get(
            "/v1/exports/gradings", params={"format": "sregym"}, headers=admin
        )
    rows = [r for r in csv.DictReader(io.StringIO(exported.text)) if r["Diagnosis.dimensions"]]
    dims = ast.literal_eval(rows[0]["Diagnosis.dimensions"])
    assert dims["D1"]["name"] == "Fault localization", dims


#: a problem of the partial checklist's archive and its ground truth
_PARTIAL_PROBLEM = "k8s_target_port-misconfig-detection-1"
_PARTIAL_TRUTH = (
    "[fault_spec] component=service/user-service; namespace=social-network || "
    "The user-service Service targets port 9999 while its pods listen on 9090."
)


def _partial_checklist_archive(tmp_path: Path) -> bytes:
    """One SREGym attempt whose judge answered eight of the rubric's nine questions."""
    results = tmp_path / "results"
    attempt = diagnosed("user-service targets port 9999 instead of 9090", set(IDS))
    attempt["Diagnosis"]["checklist"] = attempt["Diagnosis"]["checklist"][:8]
    run = write_run(results, "stratus", {_PARTIAL_PROBLEM: [attempt]}, all_file=False)
    entries = {p.relative_to(results).as_posix(): p.read_bytes() for p in run.rglob("*.csv")}
    problem = {"problem_id": _PARTIAL_PROBLEM, "root_cause": _PARTIAL_TRUTH}
    entries["problems.jsonl"] = (json.dumps(problem) + "\n").encode()
    return tar_gz(entries)


async def test_an_sregym_verdict_answering_some_questions_exports_as_the_api_shows_it(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """An imported SREGym verdict whose checklist left a question out reads with the
    current rubric in the API, and so in every export: its ``jsonl`` line is the grading
    object, and ``format=sregym`` names its dimensions as that object does."""
    admin = await tokens("admin")
    async with api_client() as client:
        created = await client.post(
            "/v1/imports",
            content=_partial_checklist_archive(tmp_path),
            headers={**admin, "Content-Type": "application/gzip"},
        )
        job = await finished(client, created.headers["location"], admin)
        assert job["state"] == "done" and not job["errors"], job
        lines = await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
        assert lines.status_code == 200
        [line] = lines.text.splitlines()
        first = json.loads(line)
        shown = (await client.get(f"/v1/gradings/{first['id']}", headers=admin)).json()
        sregym = await client.get(EXPORTS, params={"format": "sregym"}, headers=admin)
    assert len(first["answers"]) == 8
    differing = sorted(k for k in set(first) | set(shown) if first.get(k) != shown.get(k))
    assert differing == [], (differing, first["dimensions"], shown["dimensions"])
    [row] = list(csv.DictReader(io.StringIO(sregym.text)))
    dims = ast.literal_eval(row["Diagnosis.dimensions"])
    assert {d: v["name"] for d, v in dims.items()} == {
        d["id"]: d["name"] for d in shown["dimensions"]
    }
    assert dims["D1"]["name"] == "Fault localization", dims


async def test_an_imported_verdict_exports_as_the_api_shows_it_after_a_rubric_rollback(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """An imported SREGym verdict (rubric version ``sregym``, no stored rubric) reads
    with its rubric file's current version, in the API and in every export alike: a
    wording the service ran with for a while and that was rolled back (stored last,
    current no longer) names no dimension of it."""
    shipped = (DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text()
    first, reworded = tmp_path / "v1", tmp_path / "v2"
    first.mkdir()
    reworded.mkdir()
    (first / "sregym-rca.yaml").write_text(shipped)
    (reworded / "sregym-rca.yaml").write_text(
        shipped.replace("label: v1", "label: v2").replace(
            "name: Fault localization", "name: Where the fault is"
        )
    )
    admin = await tokens("admin")
    async with api_client(rubric_dir=first) as client:
        await _imported_sregym(client, admin, tmp_path)
    async with api_client(rubric_dir=reworded, start_workers=False) as client:  # v2 stored
        assert (await client.get("/v1/rubrics", headers=admin)).status_code == 200
    async with api_client(rubric_dir=first, start_workers=False) as client:  # rolled back
        lines = await client.get(EXPORTS, params={"format": "jsonl"}, headers=admin)
        assert lines.status_code == 200, lines.text
        exported = json.loads(lines.text.splitlines()[0])
        shown = (await client.get(f"/v1/gradings/{exported['id']}", headers=admin)).json()
        sregym = await client.get(EXPORTS, params={"format": "sregym"}, headers=admin)
    assert shown["dimensions"][0]["name"] == "Fault localization"
    assert exported["dimensions"] == shown["dimensions"]
    rows = [r for r in csv.DictReader(io.StringIO(sregym.text)) if r["Diagnosis.dimensions"]]
    dims = ast.literal_eval(rows[0]["Diagnosis.dimensions"])
    assert dims["D1"]["name"] == "Fault localization", dims


async def test_a_human_verdict_on_an_unscored_import_is_named_in_the_sregym_reasoning(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """An attempt SREGym's judge could not grade (nine "No" with its parse-failure
    evidence) is imported unscored; once an adjudicator's verdict override decides it,
    the SREGym exports (per grading and SREGym's own layout) write that verdict in
    ``Diagnosis.success`` and say in ``Diagnosis.reasoning`` that a human decided it."""
    checklist = [
        {
            "id": q,
            "answer": "No",
            "evidence": "parse failure — defaulting to No",
            "confidence": "Low",
        }
        for q in IDS
    ]
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis=DIAGNOSIS, ground_truth=TRUTH, success=False
    )
    entries = {p.relative_to(fixture.root).as_posix(): p.read_bytes()
               for p in fixture.root.rglob("*.csv")}  # fmt: skip
    entries["problems.jsonl"] = fixture.problems_file.read_bytes()
    admin = await tokens("admin")
    async with api_client() as client:
        created = await client.post(
            "/v1/imports", content=tar_gz(entries), headers={**admin, **_TAR}
        )
        job = await finished(client, created.headers["location"], admin)
        assert job["state"] == "done" and job["report"]["sregym_verdicts"] == 1, job
        [grading] = (await client.get("/v1/gradings", headers=admin)).json()["items"]
        assert grading["status"] == "unscored"
        decided = await client.post(
            f"/v1/gradings/{grading['id']}/overrides",
            json={"verdict": "pass", "reason": "names the service and the port"},
            headers={**admin, "If-Match": f'"{grading["revision"]}"'},
        )
        assert decided.status_code == 201, decided.text
        exported = [
            await client.get(EXPORTS, params=params, headers=admin)
            for params in ({"format": "sregym"}, {"format": "sregym", "layout": "file"})
        ]
    for export in exported:
        [row] = list(csv.DictReader(io.StringIO(export.text)))
        assert row["Diagnosis.success"] == "True"
        reasoning = row["Diagnosis.reasoning"]
        assert reasoning.startswith("unscored: sregym_judge_parse_failure"), reasoning
        assert reasoning.endswith("; pass by human verdict override"), reasoning


@pytest.mark.parametrize("as_graded", [False, True], ids=["unscored", "graded_earlier"])
async def test_an_sregym_attempt_without_verdict_exports_neither_pass_nor_fail(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path, as_graded: bool
) -> None:
    """An imported SREGym attempt with no verdict (a checklist that leaves questions out
    and no ``Diagnosis.success``; unscored, or graded without a verdict as earlier
    versions stored it) exports with empty ``Diagnosis.success`` and ``judgment``, and
    its ``Diagnosis.reasoning`` says neither pass nor fail but why there is none."""
    await import_partial_checklist(engine, tmp_path, as_graded_earlier=as_graded)
    admin = await tokens("admin")
    async with api_client(start_workers=False) as client:
        export = await client.get(EXPORTS, params={"format": "sregym"}, headers=admin)
    assert export.status_code == 200, export.text
    [row] = list(csv.DictReader(io.StringIO(export.text)))
    assert (row["Diagnosis.success"], row["Diagnosis.judgment"]) == ("", "")
    reasoning = row["Diagnosis.reasoning"]
    assert not re.search(r"\b(pass|fail)\b", reasoning), reasoning
    if as_graded:
        assert reasoning == "5 yes; D1 1.00, D2 0.67; no verdict", reasoning
    else:
        assert reasoning.startswith("unscored: sregym_checklist_incomplete (Diagnosis"), reasoning


#: two problems of SREGym's driver and their ground truths
_LAYOUT_PROBLEMS = {
    "k8s_target_port-misconfig-detection-1": "[fault_spec] component=service/user-service "
    "|| targets port 9999, not 9090.",
    "k8s_scale_pod_zero-detection-1": "[fault_spec] component=deployment/user-service "
    "|| scaled to zero replicas.",
}


async def _uploaded_run(
    client: Any, admin: dict[str, str], tmp_path: Path, *, run: str = RUN
) -> None:
    """One attempt of each of :data:`_LAYOUT_PROBLEMS` as SREGym's driver writes them (each
    in its three files) in the run folder ``run``, uploaded under a top folder
    ``results``, its job done."""
    results = tmp_path / "results"
    attempt = diagnosed("user-service port 9999", set(IDS))
    write_run(results, "stratus", {pid: [attempt] for pid in _LAYOUT_PROBLEMS}, run=run)
    entries = {f"results/{p.relative_to(results).as_posix()}": p.read_bytes()
               for p in results.rglob("*.csv")}  # fmt: skip
    entries["problems.jsonl"] = "".join(
        json.dumps({"problem_id": k, "root_cause": v}) + "\n" for k, v in _LAYOUT_PROBLEMS.items()
    ).encode()
    created = await client.post(
        "/v1/imports",
        content=tar_gz(entries),
        headers={**admin, "Content-Type": "application/gzip"},
    )
    assert created.status_code == 202, created.text
    job = await finished(client, created.headers["location"], admin)
    assert job["state"] == "done" and job["report"]["submissions"] == 2, job


async def test_a_run_folder_named_by_its_time_exports_as_a_folder(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """A run folder named by an ISO time (``2025-06-01T12:00:00``, a legal name on Linux
    and macOS) under the archive's top folder is imported with its path from the run
    folder on, and the folder export gives it back there."""
    admin = await tokens("admin")
    async with api_client() as client:
        await _uploaded_run(client, admin, tmp_path, run="2025-06-01T12:00:00")
        exported = await client.get(
            EXPORTS, params={"format": "sregym", "layout": "folder"}, headers=admin
        )
    assert exported.status_code == 200, exported.text
    with tarfile.open(fileobj=io.BytesIO(exported.content), mode="r:gz") as tar:
        assert {n.split("/")[0] for n in tar.getnames()} == {"2025-06-01T12:00:00"}


async def test_x_export_rows_of_the_sregym_layouts_counts_attempts(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """With ``layout=file`` or ``layout=folder``, ``X-Export-Rows`` counts attempts, as
    the route's description says: two attempts, each written by SREGym's driver in its
    three files, count 2."""
    admin = await tokens("admin")
    counts = {}
    async with api_client() as client:
        await _uploaded_run(client, admin, tmp_path)
        for layout in ("file", "folder"):
            exported = await client.get(
                EXPORTS, params={"format": "sregym", "layout": layout}, headers=admin
            )
            assert exported.status_code == 200, exported.text
            counts[layout] = int(exported.headers["x-export-rows"])
    assert counts == {"file": 2, "folder": 2}
