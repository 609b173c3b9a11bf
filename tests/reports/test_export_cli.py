"""``sre-judge export`` all or nothing (issue 19, item 8), in process for the fault seam."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import socket
import tarfile
import threading
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import respx
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine

from api.cli.atomic import replace_atomically
from api.cli.main import main
from storage import Store
from tests.support.exports import LOST_CONNECTION, fail_exports_after
from tests.support.gradings import add_many
from tests.support.keys import session_key


async def _export(database_url: str, tmp_path: Path, *args: str) -> Result:
    """``sre-judge export ARGS`` in a thread (the command runs its own event loop)."""
    env = {"SRE_JUDGE_DATABASE_URL": database_url}  # keyed as the tests' stores are
    runner = CliRunner(env=env)
    return await asyncio.to_thread(runner.invoke, main, ["export", *args])


async def test_a_complete_export_reports_its_rows_and_sha256(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 2, "fail": 1})
    out = tmp_path / "out"
    out.mkdir()
    target = out / "gradings.jsonl"
    done = await _export(database_url, tmp_path, "--format", "jsonl", "-o", str(target))
    assert done.exit_code == 0, done.output
    body = target.read_bytes()
    assert len([json.loads(line) for line in body.splitlines()]) == 3
    digest = hashlib.sha256(body).hexdigest()
    assert f"3 gradings exported to {target} (sha256 {digest})" in done.stderr
    assert [p.name for p in out.iterdir()] == ["gradings.jsonl"]


async def test_a_failed_export_exits_1_and_writes_no_file(
    database_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 5})
    fail_exports_after(monkeypatch, 3)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "sregym.csv"
    done = await _export(database_url, tmp_path, "--format", "sregym", "-o", str(target))
    assert done.exit_code == 1, done.output
    assert not target.exists()
    assert list(out.iterdir()) == []  # no temporary file left behind
    assert "export failed after 3 gradings" in done.stderr and LOST_CONNECTION in done.stderr


async def test_a_failed_export_leaves_an_earlier_file_as_it_was(
    database_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 2})
    target = tmp_path / "gradings.csv"
    first = await _export(database_url, tmp_path, "--format", "csv", "-o", str(target))
    assert first.exit_code == 0, first.output
    before = target.read_bytes()
    await add_many(Store(engine, key=session_key()), {"fail": 2})
    fail_exports_after(monkeypatch, 3)
    done = await _export(database_url, tmp_path, "--format", "csv", "-o", str(target))
    assert done.exit_code == 1 and target.read_bytes() == before
    assert f"{target} is unchanged" in done.stderr


async def test_a_failed_export_to_stdout_prints_nothing_and_exits_1(
    database_url: str, engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await add_many(Store(engine, key=session_key()), {"pass": 3})
    fail_exports_after(monkeypatch, 2)
    done = await _export(database_url, tmp_path, "--format", "jsonl")
    assert done.exit_code == 1 and done.stdout == ""
    assert "export failed after 2 gradings" in done.stderr


def _interrupted_write(target: Path) -> None:
    with replace_atomically(target) as file:
        file.write(b"half")
        raise KeyboardInterrupt


def test_an_atomic_replace_keeps_the_old_mode_and_removes_its_temporary_on_error(
    tmp_path: Path,
) -> None:
    target = tmp_path / "export.csv"
    with replace_atomically(target) as file:
        file.write(b"a\n")
    umask = os.umask(0)
    os.umask(umask)
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask  # as a plain open() would make it
    target.chmod(0o600)
    with pytest.raises(KeyboardInterrupt):
        _interrupted_write(target)
    assert target.read_bytes() == b"a\n" and [p.name for p in tmp_path.iterdir()] == ["export.csv"]
    with replace_atomically(target) as file:
        file.write(b"b\n")
    assert target.read_bytes() == b"b\n" and target.stat().st_mode & 0o777 == 0o600


async def test_an_sregym_folder_comes_back_whole_as_a_folder_or_one_file(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    from api.imports.problems import read_problems
    from api.imports.queries import ImportQueries
    from api.imports.sregym import read_sregym_folder
    from tests.storage.helpers import sregym_rubric
    from tests.support.sregym_results import write_sregym_results

    fixture = write_sregym_results(tmp_path)
    store = Store(engine, key=session_key())
    await ImportQueries(store.db, store.catalog).sregym(
        read_sregym_folder(fixture.root),
        read_problems(fixture.problems_file),
        rubric=sregym_rubric(),
    )
    out = tmp_path / "again"
    args = ("--format", "sregym", "--layout", "folder", "-o", str(out))
    done = await _export(database_url, tmp_path, *args)
    assert done.exit_code == 0, done.output
    assert "45 SREGym attempts exported" in done.stderr

    def files(root: Path) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*.csv")}

    assert files(out) == files(fixture.root)
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".part")]
    again = await _export(database_url, tmp_path, *args)
    assert again.exit_code == 2 and "not an empty folder" in again.stderr
    one = await _export(database_url, tmp_path, "--format", "sregym", "--layout", "file")
    assert one.exit_code == 0 and one.stdout.count("\n") > 45
    wrong = await _export(database_url, tmp_path, "--format", "csv", "--layout", "file")
    assert wrong.exit_code == 2


@pytest.mark.parametrize("layout", [[], ["--format", "sregym", "--layout", "file"]])
def test_an_export_the_server_failed_to_write_exits_1_and_writes_nothing(
    tmp_path: Path, layout: list[str]
) -> None:
    import httpx
    import respx

    problem = {"status": 500, "title": "Export failed", "detail": "after 3 gradings"}
    target = tmp_path / "gradings.out"
    args = ["export", "--format", "jsonl", *layout, "-o", str(target)]
    with respx.mock(base_url="http://judge.test") as server:
        route = server.get("/v1/exports/gradings").mock(httpx.Response(500, json=problem))
        runner = CliRunner(env={"SRE_JUDGE_TOKEN": "srej_x"})
        done = runner.invoke(main, [*args, "--server", "http://judge.test"])
    assert route.called and done.exit_code == 1, done.output
    assert "Export failed: after 3 gradings; nothing was written" in done.stderr
    assert list(tmp_path.iterdir()) == []


#: the export a server states (``Repr-Digest``) and a body that is not it
EXPORT, OTHER = b'{"id": "g1"}\n', b'{"id": "g2"}\n'
STATED = {
    "Repr-Digest": f"sha-256=:{base64.b64encode(hashlib.sha256(EXPORT).digest()).decode()}:",
    "X-Export-Rows": "1",
}


def _export_through(answer: httpx.Response, layout: list[str], target: Path) -> Result:
    """``sre-judge export --server`` (``layout`` its SREGym flags) against a server that
    gives ``answer``."""
    args = ["export", "--format", "jsonl", *layout, "-o", str(target)]
    with respx.mock(base_url="http://judge.test") as server:
        route = server.get("/v1/exports/gradings").mock(answer)
        done = CliRunner(env={"SRE_JUDGE_TOKEN": "srej_x"}).invoke(
            main, [*args, "--server", "http://judge.test"]
        )
    assert route.called
    return done


@pytest.mark.parametrize("layout", [[], ["--format", "sregym", "--layout", "file"]])
@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(s, headers={"Location": "https://sso.example/login"}, content=b"<html/>")
        for s in (301, 302, 307)
    ]
    + [
        httpx.Response(200, headers=STATED, content=OTHER),
        httpx.Response(200, headers={**STATED, "Repr-Digest": "sha-512=:AA==:"}, content=EXPORT),
        httpx.Response(200, headers={"Repr-Digest": STATED["Repr-Digest"]}, content=EXPORT),
        httpx.Response(200, headers={"X-Export-Rows": "1"}, content=EXPORT),
    ],
    ids=["301", "302", "307", "other digest", "no sha-256", "no rows", "no digest"],
)
def test_an_answer_that_is_not_the_servers_export_is_never_saved(
    tmp_path: Path, answer: httpx.Response, layout: list[str]
) -> None:
    """All or nothing through a server too: only a 200 stating ``X-Export-Rows`` and a
    ``Repr-Digest`` that its bytes match is the export. A redirect (http to https, an SSO
    proxy's sign-in page), a body altered on the way or an answer without those headers
    exits non-zero, writes no file and leaves no temporary file behind."""
    target = tmp_path / "gradings.out"
    done = _export_through(answer, layout, target)
    assert done.exit_code != 0, done.output
    assert "nothing was written" in done.stderr or "not followed" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_servers_export_is_saved_with_the_digest_it_states(tmp_path: Path) -> None:
    target = tmp_path / "gradings.jsonl"
    done = _export_through(httpx.Response(200, headers=STATED, content=EXPORT), [], target)
    assert done.exit_code == 0, done.output
    assert target.read_bytes() == EXPORT
    assert f"1 gradings exported to {target} (sha256 {hashlib.sha256(EXPORT).hexdigest()})" in (
        done.stderr
    )


CHUNK = b'{"id": "x"}\n' * 5000  # about 60 KB
CHUNKS = 300  # about 18 MB in all


def _export_body() -> Iterator[bytes]:
    for _ in range(CHUNKS):
        yield CHUNK


def test_a_large_export_through_a_server_is_not_held_whole_in_memory(tmp_path: Path) -> None:
    """The database mode streams into a file beside --output; --server read the whole
    answer into memory first (a 60 MB export: 60 MB). It streams too now, and its sha256
    is that of what was written."""
    digest = hashlib.sha256()
    for chunk in _export_body():
        digest.update(chunk)
    size = len(CHUNK) * CHUNKS
    headers = {
        "Content-Length": str(size),
        "X-Export-Rows": str(5000 * CHUNKS),
        "Repr-Digest": f"sha-256=:{base64.b64encode(digest.digest()).decode()}:",
        "Content-Type": "application/x-ndjson",
    }
    target = tmp_path / "gradings.jsonl"
    with respx.mock(base_url="http://judge.test") as server:
        server.get("/v1/exports/gradings").mock(
            side_effect=lambda request: httpx.Response(200, headers=headers, stream=_Stream())
        )
        runner = CliRunner(env={"SRE_JUDGE_TOKEN": "srej_x"})
        tracemalloc.start()
        try:
            done = runner.invoke(
                main,
                ["export", "--format", "jsonl", "-o", str(target), "--server", "http://judge.test"],
            )
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert done.exit_code == 0, done.output
    assert target.stat().st_size == size
    assert f"sha256 {digest.hexdigest()}" in done.output
    assert peak < size // 4, f"peak {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB export"


class _Stream(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        return _export_body()


@pytest.fixture
def cutting_server() -> Iterator[str]:
    """A server that answers ``GET /v1/exports/gradings`` with a 200 stating the whole
    export (Content-Length, X-Export-Rows, Repr-Digest), sends half its bytes, and closes
    the connection: an answer cut on the way."""
    whole = EXPORT * 2000
    digest = base64.b64encode(hashlib.sha256(whole).digest()).decode()
    head = (
        "HTTP/1.1 200 OK\r\n"
        "Content-Type: application/x-ndjson\r\n"
        f"Content-Length: {len(whole)}\r\n"
        "X-Export-Rows: 2000\r\n"
        f"Repr-Digest: sha-256=:{digest}:\r\n"
        "\r\n"
    ).encode()
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(head + whole[: len(whole) // 2])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        listener.close()


@pytest.mark.parametrize("layout", [[], ["--layout", "file"]], ids=["jsonl", "sregym-file"])
def test_an_export_cut_on_the_way_writes_nothing_and_exits_1(
    tmp_path: Path, cutting_server: str, layout: list[str]
) -> None:
    """An answer cut on the way (the server went away mid-body) is a failed export, not a
    refusal: nothing is written, no temporary file is left, stderr says it was cut, and
    the exit status is 1 (2 is kept for bad usage, a redirect or a refusal, which a
    script need not retry)."""
    fmt = "sregym" if layout else "jsonl"
    target = tmp_path / "gradings.out"
    done = CliRunner(env={"SRE_JUDGE_TOKEN": "srej_x"}).invoke(
        main, ["export", "--format", fmt, *layout, "-o", str(target), "--server", cutting_server]
    )
    assert list(tmp_path.iterdir()) == []
    assert done.exit_code == 1, (done.exit_code, done.output)
    assert "was cut on the way" in done.stderr and "nothing was written" in done.stderr


def _large_results_archive() -> bytes:
    """A results folder of 16 CSV files of about 1.5 MB each (random text, which gzip
    cannot shrink much) as a tar.gz of about 20 MB."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=1) as tar:
        for n in range(16):
            rows = [b"problem_id,attempt,Diagnosis.submission\r\n"]
            for attempt in range(64):
                text = base64.b64encode(os.urandom(18_000))
                rows.append(b"p%d,%d,%s\r\n" % (n, attempt, text))
            data = b"".join(rows)
            info = tarfile.TarInfo(f"0601_1200/agent/p{n}/p{n}_agent_results.csv")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_a_large_folder_export_through_a_server_is_not_held_whole_in_memory(
    tmp_path: Path,
) -> None:
    """``--layout folder --server`` streams the server's archive to a temporary file on
    disk and unpacks it from there, as every other export through a server streams: a
    20 MB export peaks under a quarter of its size, and leaves only the folder."""
    archive = _large_results_archive()
    digest = base64.b64encode(hashlib.sha256(archive).digest()).decode()
    headers = {
        "Content-Length": str(len(archive)),
        "X-Export-Rows": str(16 * 64),
        "Repr-Digest": f"sha-256=:{digest}:",
        "Content-Type": "application/gzip",
    }
    out = tmp_path / "results-again"
    with respx.mock(base_url="http://judge.test") as server:
        server.get("/v1/exports/gradings").mock(
            side_effect=lambda request: httpx.Response(
                200, headers=headers, stream=_BytesStream(archive)
            )
        )
        runner = CliRunner(env={"SRE_JUDGE_TOKEN": "srej_x"})
        tracemalloc.start()
        try:
            done = runner.invoke(
                main,
                ["export", "--format", "sregym", "--layout", "folder", "-o", str(out),
                 "--server", "http://judge.test"],
            )  # fmt: skip
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert done.exit_code == 0, done.output
    assert len(list(out.rglob("*.csv"))) == 16
    assert os.listdir(tmp_path) == ["results-again"]
    size = len(archive)
    assert peak < size // 4, f"peak {peak / 1e6:.0f} MB for a {size / 1e6:.0f} MB export"


def _archive_with(info: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.addfile(info, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def _link(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return info


def _leaving(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = 4
    return info


@pytest.mark.parametrize(
    "archive",
    [
        _archive_with(_link("0601_1200/agent/p1/p1_agent_results.csv")),
        _archive_with(_leaving("../outside.csv"), b"a,b\n"),
    ],
    ids=["link", "leaving"],
)
def test_a_folder_from_a_server_is_unpacked_with_the_imports_checks(
    tmp_path: Path, archive: bytes
) -> None:
    """``--layout folder --server`` unpacks even an archive whose digest checks out with
    the import's checks of names and types: a link or a path leaving the folder exits 1,
    and neither the folder nor anything outside it is written."""
    digest = base64.b64encode(hashlib.sha256(archive).digest()).decode()
    stated = {"X-Export-Rows": "1", "Repr-Digest": f"sha-256=:{digest}:"}
    out = tmp_path / "export" / "results"
    out.parent.mkdir()
    done = _export_through(
        httpx.Response(200, headers=stated, content=archive),
        ["--format", "sregym", "--layout", "folder"],
        out,
    )
    assert done.exit_code == 1, done.output
    assert "sent an unusable archive" in done.stderr
    assert list(tmp_path.rglob("*")) == [out.parent]


class _BytesStream(httpx.SyncByteStream):
    """``data`` sent in chunks of 64 KiB."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __iter__(self) -> Iterator[bytes]:
        for at in range(0, len(self._data), 64 * 1024):
            yield self._data[at : at + 64 * 1024]
