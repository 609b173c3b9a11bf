"""``--server URL`` gives what the database gives: import, export and regrade options.

Two databases get the same data: ``local`` through the database mode, ``served`` through
a real ``sre-judge serve`` process with ``--server``. Each command's output must be the
same in both modes (import reports, export bytes, SREGym folders and archives).
"""

from __future__ import annotations

import csv
import io
import json
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from api.imports.problems import ImportProblem
from api.imports.remote import sregym_archive
from api.imports.report import ImportReport
from api.imports.sregym import read_sregym_folder
from api.sregym_archive import check_archive
from tests.support.in_process_cli import cli_in_process
from tests.support.service_process import serving
from tests.support.sregym_driver import IDS, RUN, diagnosed, write_run
from tests.support.sregym_results import write_sregym_results

_ENV = {
    "SRE_JUDGE_JUDGE": "scripted:pass",
    "SRE_JUDGE_POLL_SECONDS": "0.05",
    "SRE_JUDGE_PROVISIONAL_REVIEW_RATE": "0",
}


def _database(tmp_path: Path, name: str) -> dict[str, str]:
    env = {**_ENV, "SRE_JUDGE_DATABASE_URL": f"sqlite:///{tmp_path / name}.db"}
    assert cli_in_process("migrate", env=env).returncode == 0
    return env


def _progress_free(stderr: str) -> list[str]:
    """stderr without the remote mode's progress lines (``import job ID: ...``)."""
    return [line for line in stderr.splitlines() if not line.startswith("import job ")]


def _csv_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}


def _archive_files(data: bytes, kind: str) -> dict[str, bytes]:
    if kind == "zip":
        with zipfile.ZipFile(io.BytesIO(data)) as zipped:
            return {name: zipped.read(name) for name in zipped.namelist()}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _graded(env: dict[str, str]) -> None:
    """Wait until the served database has no pending grading left."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = cli_in_process("report", "pass-rates", "--format", "json", env=env)
        if json.loads(done.stdout)["overall"].get("pending", 0) == 0:
            return
        time.sleep(0.5)
    raise AssertionError("the server's workers did not grade the import")


def _exports_match(
    tmp_path: Path, fixture: Any, served: dict[str, str], remote: tuple[dict[str, str], list[str]]
) -> None:
    """export --layout folder | file, --archive: the same files through the server."""
    remote_env, via = remote
    for name, env, extra in (("mine", served, []), ("theirs", remote_env, via)):
        out = tmp_path / f"folder-{name}"
        done = cli_in_process("export", "--format", "sregym", "--layout", "folder", "-o", str(out),
                   *extra, env=env)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"45 SREGym attempts exported to {out}" in done.stderr
        assert _csv_files(out) == _csv_files(fixture.root)
    one = ["export", "--format", "sregym", "--layout", "file", "-o", "-"]
    assert (
        cli_in_process(*one, *via, env=remote_env).stdout == cli_in_process(*one, env=served).stdout
    )
    for kind in ("tar.gz", "zip"):
        packed = ["export", "--format", "sregym", "--archive", kind]
        target = tmp_path / f"results.{kind}"
        done = cli_in_process(*packed, "-o", str(target), *via, env=remote_env)
        assert done.returncode == 0, done.stderr
        assert _archive_files(target.read_bytes(), kind) == _csv_files(fixture.root)
        cli_in_process(*packed, "-o", str(target), env=served)
        assert _archive_files(target.read_bytes(), kind) == _csv_files(fixture.root)


def _import_job(refused: int, in_conflict: int, *, listed: int) -> dict[str, Any]:
    """A finished JSON lines import job as the server shows it: its report counts every
    row refused and in conflict, its lists hold the first ``listed`` of each."""
    rows = [
        {"where": f"line {n}", "field": "diagnosis", "message": "missing"}
        for n in range(1, listed + 1)
    ]
    return {
        "id": "i1", "kind": "jsonl", "archive": "jsonl", "state": "done", "rubric": None,
        "strict": False, "total": refused + in_conflict, "done": refused + in_conflict,
        "report": {
            "submissions": 0, "already_imported": 0, "sregym_verdicts": 0, "queued": 0,
            "not_graded": {}, "problems": refused, "conflicts": in_conflict,
        },
        "errors": rows[:refused], "conflicts": rows[:in_conflict], "size": 10,
        "sha256": "0" * 64, "attempts": 1, "created_by": "admin",
        "created_at": "2026-12-01T00:00:00Z", "started_at": "2026-12-01T00:00:00Z",
        "finished_at": "2026-12-01T00:00:01Z", "error": None,
    }  # fmt: skip


def test_an_import_through_a_server_counts_every_row_it_refused(tmp_path: Path) -> None:
    """``import jsonl FILE --server URL`` prints the counts the database mode prints: an
    import that refused 1500 rows and found 1200 in conflict says "1500 problems; 1200
    conflicts", though the server's job lists only the first 1000 of each (its report
    counts them all); the rows not listed are counted on stderr."""
    history = tmp_path / "history.jsonl"
    history.write_text('{"nodiagnosis": 1}\n')
    server = "http://judge.test"
    env = {"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1", "COLUMNS": "200"}
    with respx.mock:
        job = _import_job(1500, 1200, listed=1000)
        respx.post(f"{server}/v1/imports").mock(return_value=httpx.Response(202, json=job))
        done = cli_in_process(
            "import", "jsonl", str(history), "--format", "table", "--server", server, env=env
        )
    assert done.returncode == 1, done.stderr
    assert "; 1500 problems; 1200 conflicts" in done.stdout, done.stdout
    assert "...: 500 more, not listed" in done.stderr
    assert "...: 200 more, not listed" in done.stderr


def _with_a_backslash_file(root: Path) -> Path:
    """An SREGym run of ``p1`` under ``root`` and, beside its ``run_1/``, a copy of the
    attempt's file named ``notes\\copy.csv`` (a legal name on Linux, no archive entry's)."""
    write_run(root, "stratus", {"p1": [diagnosed("user-service targets port 9999", set(IDS))]})
    own = root / RUN / "stratus" / "p1" / "run_1" / "p1_results.csv"
    odd = own.parent.parent / "notes\\copy.csv"
    odd.write_bytes(own.read_bytes())
    return odd


def test_a_file_no_upload_may_name_refuses_its_own_rows_only_through_a_server(
    tmp_path: Path,
) -> None:
    """``import sregym DIR --server URL`` prints what the database mode prints when a CSV
    file's name is one no archive entry may have (a backslash): that file is left out of
    the upload and its rows are refused, naming file and line; every other file is
    uploaded and imported, and the upload is not refused whole."""
    root = tmp_path / "results"
    _with_a_backslash_file(root)
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"problem_id": "p1", "root_cause": "port 9999"}) + "\n")
    args = ["import", "sregym", str(root), "--problems", str(problems), "--format", "json"]
    mine = cli_in_process(*args, env=_database(tmp_path, "local"))
    local = json.loads(mine.stdout)
    assert (mine.returncode, local["submissions"], len(local["problems"])) == (1, 1, 1)
    assert "a name with a backslash" in local["problems"][0]

    uploaded: list[int] = []

    def accept(request: httpx.Request) -> httpx.Response:
        uploaded.append(check_archive(request.content, "tar.gz"))  # the server's check
        job = _import_job(0, 0, listed=0)  # the server imports the three files it got
        job["total"] = job["done"] = 3
        job["report"].update(submissions=1, already_imported=2, sregym_verdicts=1)
        return httpx.Response(202, json=job)

    server = "http://judge.test"
    env = {"SRE_JUDGE_TOKEN": "t0ken", "NO_COLOR": "1", "COLUMNS": "200"}
    with respx.mock:
        respx.post(f"{server}/v1/imports").mock(side_effect=accept)
        theirs = cli_in_process(*args, "--server", server, env=env)
    assert uploaded == [3]
    assert theirs.returncode == 1, theirs.stderr
    assert json.loads(theirs.stdout) == local
    assert _progress_free(theirs.stderr) == _progress_free(mine.stderr)


def test_rows_refused_before_an_upload_are_listed_where_the_database_mode_lists_them(
    tmp_path: Path,
) -> None:
    """The rows of a file left out of an upload are merged into the server's report in
    the order the database mode reads them: by file (attempts' own files first), then
    line, each file's own problem after its rows, rows counted and not listed last."""
    root = tmp_path / "results"
    odd = _with_a_backslash_file(root)
    (odd.parent / "run_1" / "p1_results.csv").write_text("problem_id,attempt\r\np1,x\r\n")
    (odd.parent / "twice.csv").write_text("problem_id,problem_id\r\np1,p1\r\n")
    every = [r for r in read_sregym_folder(root) if isinstance(r, ImportProblem)]
    upload = sregym_archive(root, {"p1": "port 9999"})
    assert (upload.files, check_archive(upload.body, "tar.gz")) == (4, 4)
    assert upload.refused == [p for p in every if odd.name in p.where]
    served = [p for p in every if p not in upload.refused]
    assert [len(served), len(upload.refused)] == [2, 1] and every[1] == upload.refused[0]
    merged = upload.report(ImportReport(problems=served)).problems
    assert merged == every
    unlisted = ImportProblem("...", "1 more, not listed")
    counted = ImportReport(problems=[*served, unlisted], problems_total=3, rows=3)
    report = upload.report(counted)
    assert report.problems == [*every, unlisted]
    assert (report.problem_count, report.rows) == (4, 4)


@pytest.mark.slow
def test_every_import_export_and_regrade_option_works_through_a_server(tmp_path: Path) -> None:
    fixture = write_sregym_results(tmp_path)
    local, served = _database(tmp_path, "local"), _database(tmp_path, "served")
    token = cli_in_process(
        "tokens", "create", "--role", "admin", "--name", "ops", env=served
    ).stdout.strip()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"diagnosis": "d", "ground_truth": "g", "agent": "x"}\nnot json\n')
    with serving(served, tmp_path / "serve.log") as server:
        remote, via = {**served, "SRE_JUDGE_TOKEN": token}, ["--server", server.url]

        # import sregym: the folder goes up as a tar.gz; same report as the database mode
        args = ["import", "sregym", str(fixture.root), "--problems", str(fixture.problems_file)]
        mine = cli_in_process(*args, "--format", "json", env=local)
        theirs = cli_in_process(*args, "--format", "json", *via, env=remote)
        assert (mine.returncode, theirs.returncode) == (0, 0), theirs.stderr
        assert json.loads(theirs.stdout) == json.loads(mine.stdout)
        assert json.loads(theirs.stdout)["sregym_verdicts"] == 42
        assert "import job " in theirs.stderr and "45/45 rows" in theirs.stderr
        table = cli_in_process(*args, "--format", "table", *via, env=remote)
        assert table.stdout == cli_in_process(*args, "--format", "table", env=local).stdout
        assert "45 already imported" in table.stdout

        # import jsonl --strict: nothing stored, the same lines on stderr, exit 1
        strict = ["import", "jsonl", str(bad), "--strict"]
        mine, theirs = cli_in_process(*strict, env=local), cli_in_process(*strict, *via, env=remote)
        assert (mine.returncode, theirs.returncode) == (1, 1), theirs.stderr
        assert _progress_free(theirs.stderr) == _progress_free(mine.stderr)
        assert "--strict: 1 problems; nothing imported" in theirs.stderr
        assert ": failed, 0/2 rows" in theirs.stderr
        lenient = ["import", "jsonl", str(bad), "--format", "json"]
        mine, theirs = (
            cli_in_process(*lenient, env=local),
            cli_in_process(*lenient, *via, env=remote),
        )
        assert (mine.returncode, theirs.returncode) == (1, 1)
        assert json.loads(theirs.stdout) == json.loads(mine.stdout)
        assert json.loads(theirs.stdout)["submissions"] == 1  # the strict run stored nothing
        assert _progress_free(theirs.stderr) == _progress_free(mine.stderr)
        # an empty --rubric is refused in both modes, never read as the service's default
        empty = ["import", "jsonl", str(bad), "--rubric", ""]
        mine, theirs = cli_in_process(*empty, env=local), cli_in_process(*empty, *via, env=remote)
        assert (mine.returncode, theirs.returncode) == (2, 2), theirs.stderr
        assert "no rubric ''" in mine.stderr and "no rubric ''" in theirs.stderr, theirs.stderr
        _graded(served)

        _exports_match(tmp_path, fixture, served, (remote, via))

        # a promoting regrade supersedes SREGym's verdicts: --include-superseded finds them
        regrade = ["regrade", "--judge", "scripted:fail", "--graded-judge", "external:sregym",
                   "--mode", "promote", "--wait", *via]  # fmt: skip
        job = cli_in_process(*regrade, "--format", "json", env=remote)
        assert job.returncode == 0, job.stderr
        assert json.loads(job.stdout)["done"] == 42
        for flags in ([], ["--include-superseded"]):
            export = ["export", "--format", "csv", "-o", "-", *flags]
            mine, theirs = (
                cli_in_process(*export, env=served),
                cli_in_process(*export, *via, env=remote),
            )
            assert theirs.returncode == 0, theirs.stderr
            assert theirs.stdout == mine.stdout
        rows = list(csv.DictReader(io.StringIO(theirs.stdout)))
        assert sum(r["is_current"] == "False" for r in rows) == 42
        assert list(rows[0])[-1] == "scenario_version"
        assert {r["scenario_version"] for r in rows if r["scenario_id"]} == {"1"}
