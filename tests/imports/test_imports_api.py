"""Imports over HTTP: an uploaded SREGym archive or JSONL stream as a background job.

Covers the whole trip (upload, progress, the SREGym export giving every file back), the
refusals (unsafe names, links, zip bombs, sizes, media types, roles), a job whose
process stopped mid-way being finished by the next one without storing anything twice,
a long job kept by its heartbeat, and a job stopped by a database fault being run again
(a bounded number of times).
"""

from __future__ import annotations

import asyncio
import csv
import gzip
import io
import json
import struct
import tarfile
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from datetime import timedelta
from itertools import islice
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from sqlmodel import col

from api.imports import jsonl, queries, runner
from api.imports.job_queries import ImportJobQueries
from api.imports.jobs import sniff_upload
from api.imports.problems import ImportProblem, read_problems
from api.imports.queries import ImportQueries
from api.imports.remote import sregym_archive
from api.imports.sregym import SregymAttempt, read_sregym_folder
from api.sregym_archive import MAX_MEMBERS, UnsafeArchive, check_archive, unpack_archive
from storage import Store, SubmissionRecord
from storage.canonical import utcnow
from storage.engine import session_factory
from storage.imports import ImportJobRecord, ImportUploadRecord
from storage.keys import ServiceKey
from storage.tables import AuditRecord, GradingRecord
from tests.imports.jobs import finished, tar_gz
from tests.storage.helpers import sregym_rubric
from tests.support.in_process_cli import cli_in_process
from tests.support.sregym_driver import IDS, RUN
from tests.support.sregym_results import write_sregym_attempt, write_sregym_results
from tests.support.submissions import DIAGNOSIS, TRUTH

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

IMPORTS = "/v1/imports"
TAR = {"Content-Type": "application/gzip"}
NDJSON = {"Content-Type": "application/x-ndjson"}
FOLDER = {"format": "sregym", "layout": "folder", "archive": "zip"}
LINE = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}


def _results_archive(tmp_path: Path) -> tuple[Path, bytes]:
    fixture = write_sregym_results(tmp_path)
    entries = _files(fixture.root)
    entries["problems.jsonl"] = fixture.problems_file.read_bytes()
    return fixture.root, tar_gz(entries)


async def _submissions(engine: Engine) -> int:
    with session_factory(engine)() as session:
        query = select(func.count()).select_from(SubmissionRecord)
        return int((session.execute(query)).scalar_one())


def _uploads(engine: Engine) -> int:
    with session_factory(engine)() as session:
        query = select(func.count()).select_from(ImportUploadRecord)
        return int(session.execute(query).scalar_one())


def _refusing(write: Callable[..., None], fault: Exception, *, times: int) -> Callable[..., None]:
    """``write`` (a batch's transaction), its first ``times`` calls raising ``fault``."""
    calls: list[int] = []

    def refused(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) <= times:
            raise fault
        write(*args, **kwargs)

    return refused


def _locked() -> OperationalError:
    """What SQLite says of a write while another holds the lock past the busy timeout."""
    return OperationalError("INSERT ...", {}, Exception("database is locked"))


def _lines(count: int) -> bytes:
    lines = [{**LINE, "diagnosis": f"the pod {n} ran out of memory"} for n in range(count)]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


async def test_an_uploaded_archive_is_imported_and_exports_back_file_for_file(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    root, archive = _results_archive(tmp_path)
    admin = await tokens("admin")
    async with api_client() as client:
        created = await client.post(IMPORTS, content=archive, headers={**admin, **TAR})
        assert created.status_code == 202, created.text
        assert created.json()["state"] == "queued"
        job = await finished(client, created.headers["location"], admin)
        params = {"format": "sregym", "layout": "folder", "archive": "zip"}
        exported = await client.get("/v1/exports/gradings", params=params, headers=admin)
        params = {"format": "sregym", "layout": "file"}
        one = await client.get("/v1/exports/gradings", params=params, headers=admin)
        params = {"format": "csv", "layout": "file"}
        wrong = await client.get("/v1/exports/gradings", params=params, headers=admin)
    assert one.status_code == 200 and one.headers["x-export-rows"] == "45"
    assert one.headers["content-type"].startswith("text/csv")
    assert wrong.status_code == 422 and wrong.json()["errors"][0]["field"] == "layout"
    assert job["state"] == "done" and job["errors"] == [], job
    assert job["total"] == job["done"] == 45
    assert job["report"]["submissions"] == 45
    assert job["report"]["not_graded"] == {"timed_out": 1, "deploy_failed": 1, "no_submission": 1}
    assert exported.status_code == 200 and exported.headers["x-export-rows"] == "45"
    with zipfile.ZipFile(io.BytesIO(exported.content)) as zipped:
        assert {n: zipped.read(n) for n in zipped.namelist()} == _files(root)


async def test_a_csv_file_named_in_capitals_is_imported_and_exported_by_its_name(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """A CSV file is one whose name ends ``.csv`` in any case: an archive holding only
    ``RESULTS.CSV`` is accepted, its rows are imported and the SREGym export gives the
    file back under its name."""
    checklist = [{"id": f"D{d}-Q{q}", "answer": "Yes"} for d in (1, 2, 3) for q in (1, 2, 3)]
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis="geo runs a wrong tag", ground_truth="geo", success=True
    )
    [written] = [p for p in fixture.root.rglob("*") if p.is_file()]
    name = written.relative_to(fixture.root).with_name("RESULTS.CSV").as_posix()
    files = {name: written.read_bytes()}
    archive = tar_gz({**files, "problems.jsonl": fixture.problems_file.read_bytes()})
    assert check_archive(archive, "tar.gz") == 1
    admin = await tokens("admin")
    async with api_client() as client:
        created = await client.post(IMPORTS, content=archive, headers={**admin, **TAR})
        assert created.status_code == 202, created.text
        job = await finished(client, created.headers["location"], admin)
        exported = await client.get("/v1/exports/gradings", params=FOLDER, headers=admin)
    assert job["state"] == "done" and job["errors"] == [], job
    assert job["total"] == 1 and job["report"]["submissions"] == 1, job
    with zipfile.ZipFile(io.BytesIO(exported.content)) as zipped:
        assert {n: zipped.read(n) for n in zipped.namelist()} == files


async def test_a_jsonl_stream_reports_its_bad_lines(api_client: Any, tokens: Any) -> None:
    good = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}
    body = f"{json.dumps(good)}\nnot json\n{json.dumps({**good, 'agent': 'b'})}\n".encode()
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        headers = {**admin, "Content-Type": "application/x-ndjson"}
        created = await client.post(IMPORTS, content=body, headers=headers)
        job = await finished(client, created.headers["location"], admin)
    assert job["state"] == "done" and job["total"] == job["done"] == 3
    assert job["report"]["submissions"] == 2 and job["report"]["problems"] == 1
    [error] = job["errors"]
    assert error["where"] == "line 2" and "not valid JSON" in error["message"]


async def test_an_import_over_http_is_audited_in_the_name_of_the_admin_who_uploaded_it(
    api_client: Any, engine: Engine, service_key: ServiceKey, tmp_path: Path
) -> None:
    """Each submission an import job stores, and each scenario an SREGym import
    registers, is audited in the name of the admin who uploaded it, the submission's
    event naming the job; the submissions stay ``import:jsonl``'s and ``import:sregym``'s,
    under which a re-import looks them up."""
    plaintext, admin = await Store(engine, key=service_key).tokens.create(name="Ada", role="admin")
    headers = {"Authorization": f"Bearer {plaintext}"}
    checklist = [{"id": f"D{d}-Q{q}", "answer": "Yes"} for d in (1, 2, 3) for q in (1, 2, 3)]
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis="geo runs a wrong tag", ground_truth="geo", success=True
    )
    archive = tar_gz({**_files(fixture.root), "problems.jsonl": fixture.problems_file.read_bytes()})
    jobs = {}
    async with api_client(judge="scripted:pass") as client:
        for kind, body, media_type in [
            ("jsonl", (json.dumps({**LINE, "agent": "imported"}) + "\n").encode(), NDJSON),
            ("sregym", archive, TAR),
        ]:
            created = await client.post(IMPORTS, content=body, headers={**headers, **media_type})
            assert created.status_code == 202, created.text
            jobs[kind] = await finished(client, created.headers["location"], headers)
            assert jobs[kind]["state"] == "done" and jobs[kind]["report"]["submissions"] == 1
    with session_factory(engine)() as session:
        rows = list(session.execute(select(AuditRecord).order_by(col(AuditRecord.seq))).scalars())
        submitted_by = {
            s.agent: s.submitted_by for s in session.execute(select(SubmissionRecord)).scalars()
        }
    imported = [r for r in rows if r.event == "submission.imported"]
    assert [(r.actor, r.payload["source"], r.payload.get("import_job_id")) for r in imported] == [
        (admin.id, "jsonl", jobs["jsonl"]["id"]),
        (admin.id, "sregym", jobs["sregym"]["id"]),
    ]
    assert [r.actor for r in rows if r.event == "scenario.created"] == [admin.id]
    assert submitted_by["imported"] == "import:jsonl"
    assert set(submitted_by.values()) == {"import:jsonl", "import:sregym"}


async def test_a_strict_jsonl_job_stores_nothing_and_fails_listing_the_bad_lines(
    api_client: Any, tokens: Any, engine: Engine, tmp_path: Path
) -> None:
    good = {"diagnosis": "the checkout pod ran out of memory", "ground_truth": "OOM in checkout"}
    body = f"{json.dumps(good)}\nnot json\n".encode()
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        headers = {**admin, "Content-Type": "application/x-ndjson"}
        created = await client.post(
            IMPORTS, content=body, headers=headers, params={"strict": "true"}
        )
        assert created.status_code == 202 and created.json()["strict"] is True
        job = await finished(client, created.headers["location"], admin)
        _, archive = _results_archive(tmp_path)
        refused = await client.post(IMPORTS, content=archive, headers={**admin, **TAR},
                                    params={"strict": "true"})  # fmt: skip
    assert (job["state"], job["error"]) == ("failed", "strict: 1 problems; nothing imported")
    assert [e["where"] for e in job["errors"]] == ["line 2"]
    assert await _submissions(engine) == 0
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "strict"


async def test_a_failed_strict_job_counts_every_bad_line(api_client: Any, tokens: Any) -> None:
    """A strict job that fails lists the first 1000 bad lines in ``errors`` and counts
    all of them in ``report.problems``, as a job that is done does."""
    body = (json.dumps(LINE) + "\n" + "not json\n" * 1200).encode()
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(
            IMPORTS, content=body, headers={**admin, **NDJSON}, params={"strict": "true"}
        )
        assert created.status_code == 202, created.text
        job = await finished(client, created.headers["location"], admin)
    assert job["state"] == "failed"
    assert job["error"] == "strict: 1200 problems; nothing imported"
    assert len(job["errors"]) == 1000
    assert (job["report"]["problems"], job["report"]["conflicts"]) == (1200, 0), job["report"]
    assert job["report"]["submissions"] == 0


async def test_a_strict_job_with_a_line_in_conflict_stores_nothing(
    api_client: Any, tokens: Any, engine: Engine
) -> None:
    """A strict job is all or nothing for a line in conflict too (one repeating an
    imported attempt with another diagnosis, left out either way): it fails counting it,
    lists it in ``conflicts``, and the file's new line is not stored."""
    admin = await tokens("admin")
    attempt = {**LINE, "agent": "a", "run_id": "r1", "attempt": 1}
    changed = {**attempt, "diagnosis": "the disk filled up"}
    second = "".join(json.dumps(x) + "\n" for x in (changed, {**LINE, "agent": "new"}))
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(
            IMPORTS, content=json.dumps(attempt) + "\n", headers={**admin, **NDJSON}
        )
        assert (await finished(client, created.headers["location"], admin))["state"] == "done"
        created = await client.post(
            IMPORTS, content=second, headers={**admin, **NDJSON}, params={"strict": "true"}
        )
        job = await finished(client, created.headers["location"], admin)
    assert (job["state"], job["error"]) == ("failed", "strict: 1 problems; nothing imported")
    assert [c["field"] for c in job["conflicts"]] == ["diagnosis"], job
    assert (job["report"]["problems"], job["report"]["conflicts"]) == (0, 1), job["report"]
    assert await _submissions(engine) == 1


@pytest.mark.parametrize("first", ["contents", "top folder"])
async def test_the_same_results_packed_under_a_top_folder_are_one_import(
    api_client: Any, tokens: Any, tmp_path: Path, first: str
) -> None:
    """The same results uploaded as the results folder's contents (``tar czf x.tgz -C
    results .``) and under one top folder (``tar czf x.tgz results``), in either order:
    the second is already imported and the SREGym folder export gives each file once,
    at its path from the run folder."""
    fixture = write_sregym_results(tmp_path)
    files = _files(fixture.root)
    problems = fixture.problems_file.read_bytes()
    nested = {f"results/{name}": data for name, data in files.items()}
    packed = {
        "contents": tar_gz({**files, "problems.jsonl": problems}),
        "top folder": tar_gz({**nested, "results/problems.jsonl": problems}),
    }
    second = "contents" if first == "top folder" else "top folder"
    admin = await tokens("admin")
    async with api_client() as client:
        created = await client.post(IMPORTS, content=packed[first], headers={**admin, **TAR})
        await finished(client, created.headers["location"], admin)
        before = await client.get("/v1/exports/gradings", params=FOLDER, headers=admin)
        again = await client.post(IMPORTS, content=packed[second], headers={**admin, **TAR})
        job = await finished(client, again.headers["location"], admin)
        after = await client.get("/v1/exports/gradings", params=FOLDER, headers=admin)
    assert job["state"] == "done" and job["report"]["submissions"] == 0
    assert job["report"]["already_imported"] == 45
    for exported in (before, after):
        with zipfile.ZipFile(io.BytesIO(exported.content)) as zipped:
            assert {n: zipped.read(n) for n in zipped.namelist()} == files


async def test_an_export_uploaded_again_after_a_scenario_edit_is_already_imported(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    """An SREGym export archive (no problems file: its ground truths are the registered
    scenarios') uploaded again after one scenario's ground truth was edited holds the
    very rows imported: every attempt is already imported, none in conflict."""
    fixture = write_sregym_results(tmp_path)
    files = _files(fixture.root)
    problem = "k8s_target_port-misconfig-detection-1"
    archive = tar_gz({**files, "problems.jsonl": fixture.problems_file.read_bytes()})
    admin = await tokens("admin")
    async with api_client() as client:
        created = await client.post(IMPORTS, content=archive, headers={**admin, **TAR})
        job = await finished(client, created.headers["location"], admin)
        assert job["state"] == "done" and job["report"]["submissions"] == 45, job
        scenario = await client.get(f"/v1/scenarios/{problem}", headers=admin)
        edited = await client.put(
            f"/v1/scenarios/{problem}",
            json={"ground_truth": "[fault_spec] component=service/user-service || reworded"},
            headers={**admin, "If-Match": scenario.headers["etag"]},
        )
        assert edited.status_code == 200 and edited.json()["version"] == 2, edited.text
        params = {"format": "sregym", "layout": "folder", "archive": "tar.gz"}
        export = await client.get("/v1/exports/gradings", params=params, headers=admin)
        assert export.status_code == 200, export.text
        with tarfile.open(fileobj=io.BytesIO(export.content)) as tar:
            unpacked = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}  # type: ignore[union-attr]
        assert unpacked == files
        again = await client.post(IMPORTS, content=export.content, headers={**admin, **TAR})
        job = await finished(client, again.headers["location"], admin)
    assert job["state"] == "done", job
    assert job["report"]["conflicts"] == 0, job["conflicts"][:3]
    assert (job["report"]["submissions"], job["report"]["already_imported"]) == (0, 45)


def _zip(entries: dict[str, bytes], *, mode: int | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, data in entries.items():
            info = zipfile.ZipInfo(name)
            if mode is not None:
                info.external_attr = mode << 16
            zipped.writestr(info, data)
    return buffer.getvalue()


def _symlinktar_gz() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("run/agent/p/results.csv")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return buffer.getvalue()


CSV = b"problem_id,attempt\np,1\n"


def _unreadable_zip(flaw: str) -> bytes:
    """A zip whose one member the server cannot read: ``password`` (flagged encrypted),
    ``method`` (compressed by method 99, AES), ``name`` (flagged UTF-8, holding a byte
    that is not) or ``unflagged name`` (the same byte, not flagged UTF-8)."""
    data = bytearray(_zip({"a/rX.csv": CSV}))
    for flags in (6, data.find(b"PK\x01\x02") + 8):  # in its local and central headers
        if flaw == "password":
            data[flags] |= 0x01
        elif flaw == "method":
            data[flags + 2 : flags + 4] = (99).to_bytes(2, "little")
        elif flaw == "name":
            data[flags + 1] |= 0x08
    return bytes(data.replace(b"rX.csv", b"r\xff.csv") if flaw.endswith("name") else data)


#: six CSV files, to be damaged at the fourth: what comes before the damage is readable
_MANY = [(f"r/a/p{i}/results.csv", CSV * 50) for i in range(6)]


def _damaged_tar(flaw: str) -> bytes:
    """A plain tar of :data:`_MANY` damaged at its fourth member's header: ``checksum``
    (the header's checksum wrong, the whole gzipped as a tar.gz) or ``cut`` (the upload
    ends in the middle of that header, as when a client stops sending)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in _MANY:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as tar:
        at = tar.getmembers()[3].offset
    raw = bytearray(buffer.getvalue())
    if flaw == "cut":
        return bytes(raw[: at + 100])
    raw[at + 148 : at + 156] = b"0000000\x00"  # where a header keeps its checksum
    return gzip.compress(bytes(raw))


def _damaged_zip() -> bytes:
    """A zip of :data:`_MANY` whose fourth member's compressed bytes are damaged."""
    data = bytearray(_zip(dict(_MANY)))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zipped:
        info = zipped.infolist()[3]
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for byte in range(at + 2, at + 12):
        data[byte] ^= 0xFF
    return bytes(data)


UNSAFE = {
    "dot-dot": (tar_gz({"../evil.csv": CSV}), TAR, ".."),
    "absolute": (_zip({"/tmp/evil.csv": CSV}), {"Content-Type": "application/zip"}, "absolute"),
    "symlink in tar": (_symlinktar_gz(), TAR, "links"),
    "symlink in zip": (
        _zip({"a/results.csv": b"/etc/passwd"}, mode=0o120777),
        {"Content-Type": "application/zip"},
        "links",
    ),
    "zip bomb": (
        _zip({"a/results.csv": b"0" * 3_000_000}),
        {"Content-Type": "application/zip"},
        "unpacks to more than",
    ),
    "not an archive": (b"plain text", TAR, "not a readable"),
    # a tar made where names are Latin-1: no database stores the name, no answer shows it
    "a name that is not UTF-8": (tar_gz({"r/ag\udcffent/p/results.csv": CSV}), TAR, "not UTF-8"),
    # a folder name no file system takes (100 characters, 300 bytes), a path too long
    "a folder name past 255 bytes": (
        tar_gz({f"r/{'日' * 100}/p/results.csv": CSV}),
        TAR,
        "longer than 255 bytes",
    ),
    "a path past 1024 bytes": (
        _zip({"/".join(["a" * 200] * 6) + "/results.csv": CSV}),
        {"Content-Type": "application/zip"},
        "a path longer than 1024 bytes",
    ),
    **{
        f"a zip member {what}": (
            _unreadable_zip(flaw),
            {"Content-Type": "application/zip"},
            "not a readable zip",
        )
        for flaw, what in (
            ("password", "with a password"),
            ("method", "compressed by an unknown method"),
            ("name", "whose name is flagged UTF-8 but is not"),
            ("unflagged name", "whose name is not UTF-8"),
        )
    },
    # damaged: refused whole, never imported up to the damage
    "a tar.gz with a damaged header midway": (_damaged_tar("checksum"), TAR, "not a readable"),
    "a plain tar cut short": (
        _damaged_tar("cut"),
        {"Content-Type": "application/x-tar"},
        "not a readable",
    ),
    "a zip with a damaged member": (
        _damaged_zip(),
        {"Content-Type": "application/zip"},
        "not a readable zip",
    ),
    "no csv": (tar_gz({"readme.txt": b"hi"}), TAR, "no CSV"),
    # the job could not unpack them: refused before it is accepted
    "a file twice": (
        tar_gz([("r/a/p/results.csv", CSV), ("./r/a//p/results.csv", CSV)]),
        TAR,
        "given twice",
    ),
    "a file and a folder of one name": (
        tar_gz([("r/a/p.csv", CSV), ("r/a/p.csv/results.csv", CSV)]),
        TAR,
        "a file and a folder of one name",
    ),
}


def _directory_only_zip(entries: int) -> bytes:
    """A zip64 whose central directory lists ``entries`` empty files and nothing else:
    about 53 bytes an entry, a million of them well under the upload limit."""
    record = struct.Struct("<4s6H3L5H2L")
    directory = b"".join(
        record.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0) + b"%07d" % i
        for i in range(entries)
    )
    end64 = struct.pack(
        "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries, len(directory), 0
    )
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, len(directory), 1)
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, len(directory), 0, 0)
    return directory + end64 + locator + end


def test_a_zip_of_too_many_entries_is_refused_before_its_directory_is_read() -> None:
    """``zipfile`` makes an object of every entry before they can be counted: the entry
    limit was checked after the work (a 53 MB upload of a million entries: 460 MB, a
    minute). The records are counted in place first."""
    data = _directory_only_zip(MAX_MEMBERS + 20_000)
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArchive, match=f"more than {MAX_MEMBERS} entries"):
            check_archive(data, "zip")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(data), f"{peak / 1e6:.0f} MB for a {len(data) / 1e6:.1f} MB upload"
    assert check_archive(b"stub" + _zip({"a/results.csv": CSV}), "zip") == 1  # offset kept


def test_a_zip_name_in_utf8_without_the_flag_is_unpacked_under_that_name(
    tmp_path: Path,
) -> None:
    """A zip whose names are UTF-8 without the zip's UTF-8 flag (what Info-ZIP's ``zip
    -r`` writes on Linux for a folder named ``agént``) is read with its names as every
    unzip tool reads them, not as code page 437 (``ag├⌐nt``): the agent, run and problem
    of each row come from those names."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("0601_1200/agXXnt/p1/run_1/p1_results.csv", CSV)
    data = buffer.getvalue().replace(b"agXXnt", "agént".encode())  # as long in UTF-8
    with zipfile.ZipFile(io.BytesIO(data)) as check:
        assert not check.infolist()[0].flag_bits & 0x800  # the UTF-8 flag is not set
    assert check_archive(data, "zip") == 1
    unpack_archive(data, "zip", tmp_path)
    found = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.csv"))
    assert found == ["0601_1200/agént/p1/run_1/p1_results.csv"]


@pytest.mark.parametrize("case", sorted(UNSAFE))
async def test_unsafe_archives_are_refused_and_nothing_is_stored(
    api_client: Any, tokens: Any, engine: Engine, case: str
) -> None:
    """An archive the server cannot unpack safely, or at all (a name leaving it, a link,
    a bomb, a name that is not UTF-8, a zip member with a password), is refused with 422
    naming ``body``, saying why, and no job is stored."""
    body, headers, reason = UNSAFE[case]
    admin = await tokens("admin")
    async with api_client(start_workers=False, import_max_unpacked_bytes=1_000_000) as client:
        response = await client.post(IMPORTS, content=body, headers={**admin, **headers})
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert reason in response.json()["detail"]
    assert response.json()["errors"][0]["field"] == "body"
    with session_factory(engine)() as session:
        jobs = (session.execute(select(func.count()).select_from(ImportJobRecord))).scalar()
    assert jobs == 0


@pytest.mark.parametrize("flaw", ["checksum", "cut", "zip"])
def test_a_damaged_archive_is_refused_whole_by_the_check_and_the_unpacking(
    tmp_path: Path, flaw: str
) -> None:
    """A tar whose header midway is damaged or cut short, or a zip whose member's bytes
    are damaged, is unreadable: the check and the unpacking both refuse it as such (not
    a raw ``zlib.error``), rather than end it at the damage as if it were complete."""
    body, kind = (_damaged_zip(), "zip") if flaw == "zip" else (_damaged_tar(flaw), "tar.gz")
    with pytest.raises(UnsafeArchive, match=f"not a readable {kind} archive"):
        check_archive(body, kind)
    with pytest.raises(UnsafeArchive, match=f"not a readable {kind} archive"):
        unpack_archive(body, kind, tmp_path)


def test_a_tar_ending_in_its_two_blocks_of_zeros_is_read_whole(tmp_path: Path) -> None:
    """A tar is complete at its two end blocks of zeros, without the padding most tools
    add after them: every file is unpacked."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in _MANY:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue().rstrip(b"\x00")
    raw += b"\x00" * (-len(raw) % tarfile.BLOCKSIZE + 2 * tarfile.BLOCKSIZE)
    assert check_archive(raw, "tar.gz") == len(_MANY)
    unpack_archive(raw, "tar.gz", tmp_path)
    assert len(list(tmp_path.rglob("*.csv"))) == len(_MANY)


async def test_size_media_type_and_role_are_checked(api_client: Any, tokens: Any) -> None:
    admin, submitter = await tokens("admin"), await tokens("submitter", name="s")
    async with api_client(start_workers=False, import_max_bytes=4096) as client:
        big = await client.post(IMPORTS, content=b"x" * 5000, headers={**admin, **TAR})
        text = {"Content-Type": "text/plain"}
        wrong = await client.post(IMPORTS, content=b"x", headers={**admin, **text})
        denied = await client.post(IMPORTS, content=b"x", headers={**submitter, **TAR})
        unknown = await client.get(f"{IMPORTS}/nope", headers=admin)
    assert big.status_code == 413 and big.json()["errors"][0]["field"] == "body"
    assert wrong.status_code == 415 and wrong.json()["errors"][0]["field"] == "Content-Type"
    assert denied.status_code == 403
    assert unknown.status_code == 404


def _jsonl_with_ustar_at_257() -> bytes:
    """A JSON line whose bytes 257 to 261 are ``ustar`` (of ``mustard``)."""
    head = '{"diagnosis": "'
    line = {**LINE, "diagnosis": "x" * (256 - len(head)) + "mustard-service pod crashed"}
    body = (json.dumps(line) + "\n").encode()
    assert body[257:262] == b"ustar", body[250:270]
    return body


@pytest.mark.parametrize("tar_format", [tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT])
def test_an_octet_stream_is_a_tar_by_its_whole_signature(tar_format: int) -> None:
    """An ``application/octet-stream`` upload is a tar by its signature at byte 257
    (``ustar`` and NUL, or GNU's ``ustar``, two spaces and NUL), not by any five letters
    ``ustar`` there, which JSON lines may well hold."""
    packed = io.BytesIO()
    with tarfile.open(fileobj=packed, mode="w", format=tar_format) as tar:
        member = tarfile.TarInfo("run/results.csv")
        member.size = len(CSV)
        tar.addfile(member, io.BytesIO(CSV))
    assert sniff_upload(packed.getvalue()) == ("sregym", "tar.gz")
    assert sniff_upload(_jsonl_with_ustar_at_257()) == ("jsonl", "jsonl")


async def test_json_lines_holding_ustar_at_byte_257_are_imported_as_json_lines(
    api_client: Any, tokens: Any
) -> None:
    """Sent as ``application/octet-stream``, JSON lines that hold ``ustar`` at byte 257
    are imported, not refused as an unusable archive."""
    admin = await tokens("admin")
    octet = {"Content-Type": "application/octet-stream"}
    async with api_client(judge="scripted:pass") as client:
        body = _jsonl_with_ustar_at_257()
        created = await client.post(IMPORTS, content=body, headers={**admin, **octet})
        assert created.status_code == 202, created.text
        job = await finished(client, created.headers["location"], admin)
    assert (job["kind"], job["state"], job["report"]["submissions"]) == ("jsonl", "done", 1)


async def test_a_job_whose_process_stopped_midway_is_finished_once_by_the_next(
    api_client: Any, tokens: Any, engine: Engine, service_key: ServiceKey, tmp_path: Path
) -> None:
    root, archive = _results_archive(tmp_path)
    admin = await tokens("admin")
    octet = {"Content-Type": "application/octet-stream"}  # told apart by its first bytes
    async with api_client(start_workers=False) as client:
        created = await client.post(IMPORTS, content=archive, headers={**admin, **octet})
    assert created.json()["kind"] == "sregym" and created.json()["archive"] == "tar.gz"
    job_id = created.json()["id"]
    # a process claims it, imports 20 attempts and dies (its heartbeat goes stale)
    store = Store(engine, key=service_key)
    assert (await ImportJobQueries(store.db).claim("dead", stale_before=utcnow())) is not None
    problems = read_problems(root.parent / "problems.jsonl")
    attempts = islice(read_sregym_folder(root), 20)
    await ImportQueries(store.db, store.catalog).sregym(attempts, problems, rubric=sregym_rubric())
    with session_factory(engine)() as session, session.begin():
        old = utcnow() - timedelta(hours=1)
        session.execute(update(ImportJobRecord).values(heartbeat_at=old))
    async with api_client() as client:
        job = await finished(client, f"{IMPORTS}/{job_id}", admin)
    assert job["state"] == "done" and job["attempts"] == 2
    assert job["report"]["already_imported"] == 20 and job["report"]["submissions"] == 25
    assert await _submissions(engine) == 45


async def test_a_running_strict_job_is_not_taken_over_however_long_it_takes(
    api_client: Any,
    tokens: Any,
    engine: Engine,
    service_key: ServiceKey,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job's heartbeat is kept while it runs, not only when a batch is written: a strict
    import (one batch for the whole file) that runs past ``STALE_SECONDS`` is not taken
    over by another process as if its own had died. ``STALE_SECONDS`` is scaled down to
    a second and the lines read slowly, to stand for a large file."""
    monkeypatch.setattr(runner, "STALE_SECONDS", 1.0)
    parse = jsonl._parse

    def slow(text: str, **kwargs: Any) -> Any:  # a large file, read at a realistic pace
        time.sleep(0.01)
        return parse(text, **kwargs)

    monkeypatch.setattr(jsonl, "_parse", slow)
    store = Store(engine, key=service_key)
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(
            IMPORTS, content=_lines(600), headers={**admin, **NDJSON}, params={"strict": "true"}
        )
        assert created.status_code == 202, created.text
        location = created.headers["location"]
        for _ in range(200):
            job = (await client.get(location, headers=admin)).json()
            if job["state"] == "running":
                break
            await asyncio.sleep(0.02)
        assert job["state"] == "running", job
        # the job is alive and working (about 6 s of lines to read), past STALE_SECONDS
        await asyncio.sleep(3 * runner.STALE_SECONDS)
        job = (await client.get(location, headers=admin)).json()
        assert job["state"] == "running", job
        stale = store.db.clock() - timedelta(seconds=runner.STALE_SECONDS)
        taken = await ImportJobQueries(store.db).claim("import-another-process", stale_before=stale)
        assert taken is None, f"a live job was taken over as stale: {job}"


async def test_a_job_stopped_by_a_passing_database_fault_is_run_again(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch refused because the database is locked stops the job without failing it:
    the job is given back with its upload, run again (imports are idempotent) and every
    line is stored once."""
    refused = _refusing(queries._write_all, _locked(), times=1)
    monkeypatch.setattr(queries, "_write_all", refused)
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(IMPORTS, content=_lines(5), headers={**admin, **NDJSON})
        assert created.status_code == 202, created.text
        job = await finished(client, created.headers["location"], admin)
    assert (job["state"], job["attempts"], job["error"]) == ("done", 2, None), job
    assert job["report"]["submissions"] == 5
    assert await _submissions(engine) == 5
    assert _uploads(engine) == 0  # removed once the job ended


async def test_a_job_whose_give_back_meets_the_same_database_fault_runs_again_soon(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lost connection that outlasts the batch, so that giving the job back fails too,
    does not leave the job ``running`` under a live, idle process until its heartbeat
    goes stale: the runner gives it back once the database answers, saying what stopped
    it, and the job runs again within seconds, every line stored once."""
    lost = OperationalError("INSERT ...", {}, Exception("server closed the connection"))
    monkeypatch.setattr(queries, "_write_all", _refusing(queries._write_all, lost, times=1))
    release = ImportJobQueries.release
    releases: list[int] = []

    async def refused_release(self: ImportJobQueries, *args: Any, **kwargs: Any) -> bool:
        releases.append(1)
        if len(releases) == 1:
            raise lost  # the database is still out of reach a moment later
        return await release(self, *args, **kwargs)

    monkeypatch.setattr(ImportJobQueries, "release", refused_release)
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(IMPORTS, content=_lines(1), headers={**admin, **NDJSON})
        assert created.status_code == 202, created.text
        job = await finished(client, created.headers["location"], admin)
    assert (job["state"], job["attempts"]) == ("done", 2), job
    assert job["report"]["submissions"] == 1
    assert await _submissions(engine) == 1


async def test_a_job_stopped_by_a_database_fault_at_every_start_fails_saying_why(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Database faults are tried a bounded number of times: a job stopped by one at each
    of its ``MAX_STARTS`` starts fails, its ``error`` naming the fault."""
    monkeypatch.setattr(runner, "RETRY_SECONDS", 0.01)
    refused = _refusing(queries._write_all, _locked(), times=runner.MAX_STARTS)
    monkeypatch.setattr(queries, "_write_all", refused)
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(IMPORTS, content=_lines(5), headers={**admin, **NDJSON})
        job = await finished(client, created.headers["location"], admin)
    assert (job["state"], job["attempts"]) == ("failed", runner.MAX_STARTS), job
    assert "database is locked" in job["error"] and "given up" in job["error"]
    assert await _submissions(engine) == 0
    assert _uploads(engine) == 0


async def test_an_error_of_the_import_itself_fails_the_job_at_once(
    api_client: Any, tokens: Any, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fault that is not the database's reach is not run again: the job fails at its
    first start, saying why."""
    refused = _refusing(queries._write_all, RuntimeError("the importer broke"), times=1)
    monkeypatch.setattr(queries, "_write_all", refused)
    admin = await tokens("admin")
    async with api_client(judge="scripted:pass") as client:
        created = await client.post(IMPORTS, content=_lines(5), headers={**admin, **NDJSON})
        job = await finished(client, created.headers["location"], admin)
    assert (job["state"], job["attempts"]) == ("failed", 1), job
    assert "the importer broke" in job["error"]
    assert await _submissions(engine) == 0


#: an agent's folder of 84 characters (252 bytes of UTF-8) and a problem id of 128
#: characters in three folders (380 bytes): every name within 255 bytes and the limits
#: on names (200 and 128 characters), yet the attempt's own file,
#: ``<run>/<agent>/<pid>/run_1/<pid>_results.csv``, is 1,042 bytes from the run folder on
AGENT = "智" * 84
PID = "故" * 42 + "/" + "障" * 42 + "/" + "码" * 42


def _attempt_file(results: Path) -> Path:
    folder = results / RUN / AGENT / PID / "run_1"
    path = folder / f"{PID}_results.csv"
    path.parent.mkdir(parents=True)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["problem_id", "attempt", "Diagnosis.submission", "Diagnosis.success",
                     "Diagnosis.checklist"])  # fmt: skip
    checklist = repr([{"id": q, "answer": "Yes"} for q in IDS])
    writer.writerow([PID, "1", "the geo pod restarts", "True", checklist])
    path.write_text(buffer.getvalue(), newline="")
    return path


def test_a_results_folder_on_disk_with_a_path_past_an_archives_limit_is_read(
    tmp_path: Path,
) -> None:
    """A results folder on disk (``sre-judge import sregym DIR``) is read whatever the
    length of its paths: the 1,024-byte limit is an uploaded archive's entry's, which
    the server unpacks, and the client leaves such a file out of its upload naming it."""
    path = _attempt_file(tmp_path / "results")
    assert path.exists()
    found = list(read_sregym_folder(tmp_path / "results"))
    refused = [(f.where, f.message) for f in found if isinstance(f, ImportProblem)]
    assert refused == []
    assert [f.problem_id for f in found if isinstance(f, SregymAttempt)] == [PID]
    upload = sregym_archive(tmp_path / "results", {})
    assert upload.refused, "the client's upload leaves the file out, naming it"
    assert all("a path longer than 1024 bytes" in p.message for p in upload.refused)


async def test_the_history_of_an_imported_sregym_grading_names_its_verdict_judge_and_rubric(
    api_client: Any, tokens: Any, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """An imported SREGym attempt's decision (SREGym's verdict, its judge ``sregym`` and
    rubric version ``sregym``) is readable in the grading's history, as a verdict graded
    here is in its ``grading.completed``: ``submission.imported`` names it."""
    checklist = [
        {"id": q, "answer": "Yes", "evidence": "USER_PORT=9999", "confidence": "High"} for q in IDS
    ]
    fixture = write_sregym_attempt(
        tmp_path, checklist, diagnosis=DIAGNOSIS, ground_truth=TRUTH, success=True
    )
    env = {"NO_COLOR": "1", "SRE_JUDGE_DATABASE_URL": database_url}
    imported = cli_in_process(
        "import", "sregym", str(fixture.root), "--problems", str(fixture.problems_file), env=env
    )
    assert imported.returncode == 0, imported.stderr
    with engine.connect() as connection:
        grading_id = connection.execute(select(GradingRecord.id)).scalar_one()
    adjudicator = await tokens("adjudicator")
    async with api_client(start_workers=False) as client:
        grading = (await client.get(f"/v1/gradings/{grading_id}", headers=adjudicator)).json()
        history = (
            await client.get(f"/v1/gradings/{grading_id}/history", headers=adjudicator)
        ).json()
    # the precondition: a graded pass by SREGym's judge
    assert (grading["status"], grading["passed"]) == ("graded", True)
    assert grading["judge"] == {"backend": "external", "model": "sregym"}
    assert cli_in_process("audit", "verify", env=env).returncode == 0
    payloads = [e["payload"] for e in history["events"]]
    events = [e["event"] for e in history["events"]]
    decided = [p for p in payloads if p.get("passed") is True and "status" in p]
    assert decided, f"no event of {events} records the imported verdict: {payloads}"
    assert any("sregym" in str(p.get("judge")) for p in decided), decided
    assert any(p.get("rubric", {}).get("version") == "sregym" for p in decided), decided
