"""Imports quarantine a bad row and never abort the job.

Every value the API refuses in a submission (a number that is not finite or too long,
an attempt beyond PostgreSQL's INTEGER, a NUL, even one a checklist literal's escape
decodes to, a date outside the stored years, JSON nested thousands deep, a byte that
is not UTF-8) is refused in an uploaded CSV or JSON lines row with its file,
line and field, and every other row is stored; on both databases. A byte order mark is
read past; a problems file whose ground truth no submission could send fails the job
before anything is stored; a row that repeats an imported attempt with other text is a conflict; an
archive's unpacked size counts every member and stops at the limit.
"""

from __future__ import annotations

import csv
import io
import json
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from storage import SubmissionRecord
from storage.engine import session_factory
from storage.storable import MAX_INT32
from tests.imports.jobs import finished, tar_gz
from tests.support.sregym_results import COLUMNS, PROBLEMS, write_sregym_results

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

IMPORTS = "/v1/imports"
TAR = {"Content-Type": "application/gzip"}
NDJSON = {"Content-Type": "application/x-ndjson"}
PROBLEM = next(iter(PROBLEMS))
RUN = "2025-07-01_09-00-00"
BAD_CSV = f"{RUN}/quarantine/{PROBLEM}/results.csv"
DEEP = "[" * 3000 + "]" * 3000
#: line in the CSV (the header is line 1) -> (column, bad value); rows are stored 200 to a
#: transaction, so bad rows fall in the first and the second
BAD_ROWS: dict[int, tuple[str, str]] = {
    31: ("TTL", "1" * 5000),
    81: ("attempt", str(MAX_INT32 + 1)),
    151: ("Diagnosis.submission", "the pod \x00 crashed"),
    211: ("TTL", "inf"),
    231: ("Diagnosis.dimensions", DEEP),
    251: ("TTM", "-Infinity"),
    # a checklist literal's escape decodes to a NUL that no cell holds
    171: ("Diagnosis.checklist", repr([{"id": "D1-Q1", "answer": "Yes", "evidence": "\x00"}])),
    # one byte that is not UTF-8 (the cell is written in Latin-1; see _bad_values_csv)
    191: ("Diagnosis.submission", "LATIN-1 caf\u00e9"),
}
ROWS = 260


def _row(number: int, /, **cells: str) -> dict[str, str]:
    checklist = [{"id": f"D{d}-Q{q}", "answer": "Yes"} for d in (1, 2, 3) for q in (1, 2, 3)]
    return {
        "problem_id": PROBLEM, "attempt": str(number), "TTL": "41.5", "TTM": "90.0",
        "timed_out": "False", "deploy_failed": "False",
        "Diagnosis.submission": f"attempt {number}: user-service targets the wrong port",
        "Diagnosis.success": "True", "Diagnosis.composite_score": "1.0",
        "Diagnosis.checklist": repr(checklist), **cells,
    }  # fmt: skip


def _csv(rows: list[dict[str, str]], *, bom: bool = False) -> bytes:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return ("\ufeff" if bom else "").encode() + buffer.getvalue().encode("utf-8")


def _bad_values_csv() -> bytes:
    rows = []
    for line in range(2, ROWS + 2):
        column, value = BAD_ROWS.get(line, ("", ""))
        rows.append(_row(line - 1, **({column: value} if column else {})))
    return _csv(rows).replace("LATIN-1 caf\u00e9".encode(), b"caf\xe9")


def _archive(tmp_path: Path, extra: dict[str, bytes]) -> bytes:
    fixture = write_sregym_results(tmp_path)
    entries = {
        p.relative_to(fixture.root).as_posix(): p.read_bytes() for p in fixture.root.rglob("*.csv")
    }
    return tar_gz({**entries, "problems.jsonl": fixture.problems_file.read_bytes(), **extra})


async def _stored(engine: Engine, *where: Any) -> list[SubmissionRecord]:
    with session_factory(engine)() as session:
        return list((session.execute(select(SubmissionRecord).where(*where))).scalars())


async def _count(engine: Engine) -> int:
    with session_factory(engine)() as session:
        query = select(func.count()).select_from(SubmissionRecord)
        return int((session.execute(query)).scalar_one())


async def _run(api_client: Any, admin: dict[str, str], body: bytes, headers: dict[str, str],
               **settings: Any) -> dict[str, Any]:  # fmt: skip
    async with api_client(judge="scripted:pass", **settings) as client:
        created = await client.post(IMPORTS, content=body, headers={**admin, **headers})
        assert created.status_code == 202, created.text
        return await finished(client, created.headers["location"], admin)


async def test_bad_values_in_a_csv_are_refused_row_by_row_and_the_rest_is_stored(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    old_run = f"0001-01-01_00-00-00/quarantine/{PROBLEM}/results.csv"
    extra = {BAD_CSV: _bad_values_csv(), old_run: _csv([_row(1)])}
    job = await _run(api_client, await tokens("admin"), _archive(tmp_path, extra), TAR)
    assert job["state"] == "done", job
    refused = {e["where"]: e for e in job["errors"]}
    expected = {f"{BAD_CSV}:{line}": column for line, (column, _) in BAD_ROWS.items()}
    expected[f"{old_run}:2"] = "run"
    assert {where: e["field"] for where, e in refused.items()} == expected
    assert "not a finite number" in refused[f"{BAD_CSV}:211"]["message"]
    assert "2147483647" in refused[f"{BAD_CSV}:81"]["message"]
    assert "NUL" in refused[f"{BAD_CSV}:151"]["message"]
    assert "nested deeper than 32" in refused[f"{BAD_CSV}:231"]["message"]
    assert "NUL" in refused[f"{BAD_CSV}:171"]["message"]
    assert "not UTF-8" in refused[f"{BAD_CSV}:191"]["message"]
    good = ROWS - len(BAD_ROWS)
    assert job["report"]["submissions"] == 45 + good
    assert job["report"]["problems"] == len(BAD_ROWS) + 1
    assert job["done"] == job["total"] == 45 + ROWS + 1
    stored = await _stored(engine, SubmissionRecord.agent == "quarantine")
    bad_attempts = {line - 1 for line in BAD_ROWS}
    assert sorted(s.attempt or 0 for s in stored) == [
        n for n in range(1, ROWS + 1) if n not in bad_attempts
    ]


async def test_cells_whose_literal_has_an_unhashable_key_are_unreadable_not_fatal(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    """``{[1]: 2}`` is a Python literal ``ast.literal_eval`` cannot build: the cell is
    unreadable (as any cell that is no literal), its row imported, the job done."""
    unhashable = "[{[1]: 2}]"
    rows = [
        _row(1),
        _row(2, **{"Diagnosis.dimensions": "{[1]: 2}"}),
        _row(3, **{"Diagnosis.checklist": unhashable}),
        _row(4, trace=unhashable),
    ]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*COLUMNS, "trace"], restval="")
    writer.writeheader()
    writer.writerows(rows)
    archive = _archive(tmp_path, {BAD_CSV: buffer.getvalue().encode()})
    job = await _run(api_client, await tokens("admin"), archive, TAR)
    assert job["state"] == "done", job
    assert (job["report"]["submissions"], job["errors"]) == (45 + 4, []), job
    stored = await _stored(engine, SubmissionRecord.agent == "quarantine")
    assert sorted(s.attempt or 0 for s in stored) == [1, 2, 3, 4]


def _jsonl_lines() -> tuple[list[str], dict[int, str]]:
    good = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}
    bad: list[tuple[str, str]] = [
        ('{"diagnosis": "d", "ground_truth": "g", "metadata": {"TTL": Infinity}}', "metadata.TTL"),
        ('{"diagnosis": "d", "ground_truth": "g", "metadata": {"TTL": 1e999}}', "metadata.TTL"),
        ('{"diagnosis": "d", "ground_truth": "g", "attempt": ' + "1" * 5000 + "}", "attempt"),
        (json.dumps({**good, "attempt": MAX_INT32 + 1}), "attempt"),
        (json.dumps({**good, "diagnosis": "the pod \x00 crashed"}), "diagnosis"),
        (json.dumps({**good, "metadata": {"note\x00": 1}}), "metadata.note\x00"),
        (json.dumps({**good, "created_at": "0001-01-01T00:00:00+14:00"}), "created_at"),
        (json.dumps({**good, "created_at": "9999-12-31T23:00:00-14:00"}), "created_at"),
        ('{"diagnosis": "d", "ground_truth": "g", "metadata": ' + DEEP + "}", "metadata"),
        (json.dumps({**good, "metadata": {"a": json.loads("[" * 31 + "]" * 31)}}), "metadata"),
    ]
    lines, fields = [], {}
    for n, (text, field) in enumerate(bad):
        lines.append(json.dumps({**good, "agent": f"good-{n}"}))
        lines.append(text)
        fields[len(lines)] = field
    return lines, fields


async def test_bad_values_in_json_lines_are_refused_line_by_line_and_the_rest_is_stored(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    lines, fields = _jsonl_lines()
    body = ("\n".join(lines) + "\n").encode()
    job = await _run(api_client, await tokens("admin"), body, NDJSON)
    assert job["state"] == "done", job
    refused = {e["where"]: e["field"] for e in job["errors"]}
    assert refused == {f"line {n}": field for n, field in fields.items()}, job["errors"]
    assert job["report"]["submissions"] == len(fields)
    assert sorted(s.agent or "" for s in await _stored(engine)) == sorted(
        f"good-{n}" for n in range(len(fields))
    )


async def test_files_that_start_with_a_byte_order_mark_are_read(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    admin = await tokens("admin")
    archive = _archive(tmp_path, {BAD_CSV: _csv([_row(1), _row(2)], bom=True)})
    job = await _run(api_client, admin, archive, TAR)
    assert job["state"] == "done" and job["errors"] == [], job["errors"][:3]
    assert job["report"]["submissions"] == 47
    good = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}
    body = "\ufeff" + json.dumps(good) + "\n" + json.dumps({**good, "agent": "b"}) + "\n"
    job = await _run(api_client, admin, body.encode(), NDJSON)
    assert job["state"] == "done" and job["errors"] == [], job["errors"]
    assert job["report"]["submissions"] == 2


async def test_a_row_that_repeats_an_attempt_with_other_text_is_a_conflict(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    admin = await tokens("admin")
    first = _archive(tmp_path / "a", {BAD_CSV: _csv([_row(1), _row(2)])})
    job = await _run(api_client, admin, first, TAR)
    assert job["report"]["submissions"] == 47
    changed = _row(2, **{"Diagnosis.submission": "another diagnosis altogether"})
    again = _archive(tmp_path / "b", {BAD_CSV: _csv([_row(1), changed, _row(3, TTL="7")])})
    job = await _run(api_client, admin, again, TAR)
    assert job["state"] == "done" and job["errors"] == []
    report = job["report"]
    assert (report["submissions"], report["already_imported"], report["conflicts"]) == (1, 46, 1)
    [conflict] = job["conflicts"]
    assert conflict["where"] == f"{BAD_CSV}:3" and conflict["field"] == "Diagnosis.submission"
    [kept] = await _stored(engine, SubmissionRecord.agent == "quarantine",
                           SubmissionRecord.attempt == 2)  # fmt: skip
    assert kept.diagnosis.startswith("attempt 2:")  # the first import's text is kept

    line = {"diagnosis": "d1", "ground_truth": "g", "run_id": "r", "agent": "a", "attempt": 1}
    body = "\n".join(json.dumps(x) for x in (line, line, {**line, "diagnosis": "d2"}))
    job = await _run(api_client, admin, body.encode() + b"\n", NDJSON)
    report = job["report"]
    assert (report["submissions"], report["already_imported"], report["conflicts"]) == (1, 1, 1)
    assert [(c["where"], c["field"]) for c in job["conflicts"]] == [("line 3", "diagnosis")]


async def test_a_problems_file_with_a_ground_truth_no_submission_could_send_stores_nothing(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    problems = json.dumps({"problem_id": PROBLEM, "root_cause": "wrong \x00 port"}).encode()
    body = tar_gz({BAD_CSV: _csv([_row(1)]), "problems.jsonl": problems})
    job = await _run(api_client, await tokens("admin"), body, TAR)
    assert job["state"] == "failed", job
    assert "problems.jsonl:1: root_cause contains NUL bytes" in job["error"]
    assert await _count(engine) == 0


def _junk_tar() -> bytes:
    """A CSV, then 16 MB of zeros (a few kB compressed), the stream cut off in the middle
    of them: only a reader that stops at the limit reports the size, not the cut."""
    whole = tar_gz({"run/a/p/results.csv": _csv([_row(1)]), "junk.bin": b"\0" * 16_000_000})
    return whole[: len(whole) * 3 // 5]


def _junk_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("run/a/p/results.csv", _csv([_row(1)]))
        zipped.writestr("junk.bin", b"\0" * 16_000_000)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("archive", "media_type"),
    [(_junk_tar, "application/gzip"), (_junk_zip, "application/zip")],
    ids=["tar.gz", "zip"],
)
async def test_the_unpacked_size_counts_every_member_and_stops_at_the_limit(
    api_client: Any, tokens: Any, engine: Engine, archive: Any, media_type: str
) -> None:
    admin = await tokens("admin")
    body = archive()
    assert len(body) < 100_000
    async with api_client(start_workers=False, import_max_unpacked_bytes=1_000_000) as client:
        started = time.process_time()
        refused = await client.post(
            IMPORTS, content=body, headers={**admin, "Content-Type": media_type}
        )
        spent = time.process_time() - started
    assert refused.status_code == 422, refused.text
    assert "unpacks to more than 1000000 bytes" in refused.json()["detail"]
    assert spent < 1.0, f"{spent:.2f} s of CPU"
    assert await _count(engine) == 0
