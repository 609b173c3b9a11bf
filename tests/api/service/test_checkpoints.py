"""Checkpoints written by ``serve``: to a JSON Lines file (older kept) or POSTed to a URL."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from click.testing import CliRunner, Result
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from api.cli.main import main
from api.service import checkpoints
from api.service.checkpoints import (
    Checkpointer,
    append_checkpoint,
    checkpoint_target,
    default_checkpoint_file,
    newest_checkpoint,
    publish_checkpoint,
    read_checkpoints,
)
from api.service.settings import Settings
from storage import CheckpointError, Store, check_checkpoint
from storage.audit import sign_checkpoint
from storage.canonical import utcnow
from storage.keys import ServiceKey
from tests.storage.helpers import submit

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres

URL = "https://transparency.example/checkpoints"


def test_a_file_keeps_every_checkpoint_and_no_temporary(tmp_path: Path) -> None:
    key, path = ServiceKey.ephemeral(), tmp_path / "audit" / "checkpoints.jsonl"
    made = [sign_checkpoint(key, seq=n, head_hash="h", rows=n, at=utcnow()) for n in (1, 2, 3)]
    for checkpoint in made:
        append_checkpoint(path, checkpoint)
    assert read_checkpoints(path) == made
    # appended in place: no temporary or lock file beside it
    assert sorted(p.name for p in path.parent.iterdir()) == ["checkpoints.jsonl"]


def test_the_newest_checkpoint_is_the_highest_row_then_the_latest_time() -> None:
    """Processes append in any order: the newest is the highest ``seq``, of equal ones
    the latest ``time``, wherever it stands in the file."""
    key, at = ServiceKey.ephemeral(), datetime(2026, 1, 2, tzinfo=UTC)
    early = sign_checkpoint(key, seq=7, head_hash="h", rows=7, at=at)
    late = sign_checkpoint(key, seq=7, head_hash="h", rows=7, at=at + timedelta(seconds=1))
    older = sign_checkpoint(key, seq=5, head_hash="g", rows=5, at=at + timedelta(seconds=2))
    assert newest_checkpoint([late, early, older]) == late
    assert newest_checkpoint([older, early]) == early
    assert newest_checkpoint([]) is None


def _chattr(flag: str, path: Path) -> bool:
    """Set or clear a file attribute (``+a`` append-only, ``+i`` immutable); False where
    the machine cannot (no chattr, not root, a file system without attributes)."""
    if shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


def test_an_append_only_witness_file_takes_checkpoints(tmp_path: Path) -> None:
    """A witness's mount that lets this host append but not rewrite (an append-only file
    here) takes every checkpoint, after a last line a cut-off writer left unended."""
    key, path = ServiceKey.ephemeral(), tmp_path / "witness.checkpoints.jsonl"
    made = [sign_checkpoint(key, seq=n, head_hash="h", rows=n, at=utcnow()) for n in (1, 2)]
    path.write_text(made[0].to_json())  # no newline after it
    if not _chattr("+a", path):
        pytest.skip("chattr +a is not available here")
    try:
        append_checkpoint(path, made[1])
    finally:
        _chattr("-a", path)
    assert read_checkpoints(path) == made


async def test_a_checkpoint_that_cannot_be_written_exits_1(store: Store, tmp_path: Path) -> None:
    """The work failed (exit 1, as an export that cannot be written), not bad usage."""
    await submit(store)
    folder = tmp_path / "witness"
    folder.mkdir()
    if not _chattr("+i", folder):
        pytest.skip("chattr +i is not available here")
    try:
        done = await _checkpoint_command(store, "--out", str(folder / "checkpoints.jsonl"))
    finally:
        _chattr("-i", folder)
    assert done.exit_code == 1, done.output
    assert "cannot write the checkpoint to" in done.output


async def _checkpoint_command(store: Store, *args: str, cwd: Path | None = None) -> Result:
    """``sre-judge audit checkpoint`` on the store's database, in process."""
    env = {"SRE_JUDGE_DATABASE_URL": store.engine.url.render_as_string(hide_password=False)}

    def invoke() -> Result:
        runner = CliRunner()
        if cwd is None:
            return runner.invoke(main, ["audit", "checkpoint", *args], env=env)
        with runner.isolated_filesystem(temp_dir=cwd):
            return runner.invoke(main, ["audit", "checkpoint", *args], env=env)

    return await asyncio.to_thread(invoke)


async def test_the_checkpointer_writes_when_the_log_grows(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=3600)
    await submit(store)
    first = await writer.write_once()
    assert first is not None and first.seq == 2
    assert await writer.write_once() is None  # the head did not move
    await submit(store)
    # a new process picks up from the file's newest checkpoint
    later = Checkpointer(store, str(path), seconds=3600)
    assert await later.write_once() is not None
    found = read_checkpoints(path)
    assert [c.seq for c in found] == [2, 3]  # rubric + submission, then a submission
    for checkpoint in found:
        assert await check_checkpoint(store.engine, store.db.key, checkpoint) is None


async def test_the_checkpointer_writes_the_final_head_on_stop(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=3600)
    writer.start()
    await submit(store)
    await writer.stop()
    assert read_checkpoints(path)[-1].seq == 2


@pytest.mark.parametrize(
    "error",
    [
        OperationalError("SELECT 1", {}, Exception("unable to open database file")),
        RuntimeError("unforeseen"),
    ],
    ids=["database-away", "unforeseen"],
)
async def test_a_failed_round_skips_a_checkpoint_and_the_loop_goes_on(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    """A round that fails (the database not answering, or an error nobody foresaw) is
    logged and skipped: the next interval writes the checkpoint, and the shutdown's last
    write still happens."""
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=0.01)
    real = checkpoints.make_checkpoint

    async def away(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(checkpoints, "make_checkpoint", away)
    writer.start()
    await submit(store)
    await asyncio.sleep(0.05)  # rounds fail while it is away
    monkeypatch.setattr(checkpoints, "make_checkpoint", real)
    await asyncio.sleep(0.05)  # and go on once it is back
    await writer.stop()
    assert read_checkpoints(path)[-1].seq == 2


async def test_a_garbled_checkpoint_line_is_logged_and_the_checkpointer_goes_on(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A line of the file with a field of the wrong JSON type (here a numeric signature)
    is a checkpoint that cannot be written: each round logs it naming the file and line,
    and the loop and the shutdown's last write go on; the file is left as it is."""
    path = tmp_path / "checkpoints.jsonl"
    garbled = {
        "head_hash": "h",
        "key_id": store.db.key.key_id,
        "log": "sre-judge audit log",
        "rows": 1,
        "seq": 1,
        "signature": 5,
        "time": "2026-01-01T00:00:00.000000+00:00",
    }
    path.write_text(json.dumps(garbled) + "\n", encoding="utf-8")
    before = path.read_bytes()
    writer = Checkpointer(store, str(path), seconds=0.01)
    await submit(store)
    with caplog.at_level(logging.ERROR, logger="sre_judge.audit"):
        writer.start()
        await asyncio.sleep(0.05)
        task = writer._task
        assert task is not None and not task.done()  # one failed round, not the end
        await writer.stop()
    assert f"{path} line 1: not a checkpoint: signature must be text" in caplog.text
    assert path.read_bytes() == before


async def test_a_line_garbled_after_a_write_stops_the_appends_too(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The file is read afresh each round: a line garbled after the checkpointer has
    written there is logged naming the file and line, and nothing is appended after it."""
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=3600)
    await submit(store)
    assert await writer.write_once() is not None
    with path.open("a", encoding="utf-8") as handle:
        handle.write("this is not a checkpoint\n")
    before = path.read_bytes()
    await submit(store)  # the log grows: the round would write
    with caplog.at_level(logging.ERROR, logger="sre_judge.audit"):
        assert await writer.write_once() is None
    assert f"{path} line 2: not a checkpoint" in caplog.text
    assert path.read_bytes() == before


@pytest.mark.parametrize("kept", [0, 1], ids=["emptied", "cut-back"])
async def test_a_file_that_lost_its_checkpoints_is_logged_and_left_alone(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture, kept: int
) -> None:
    """Checkpoints removed from the file after they were written there (the file emptied,
    or cut back to older lines) are logged each round naming the file and the row it
    held, and nothing is appended until they are restored."""
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=3600)
    for _ in range(2):
        await submit(store)
        assert await writer.write_once() is not None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:kept]), encoding="utf-8")
    await submit(store)
    for _ in range(2):
        with caplog.at_level(logging.ERROR, logger="sre_judge.audit"):
            assert await writer.write_once() is None
        assert f"{path} holds " in caplog.text and "but held one of row 3" in caplog.text
        caplog.clear()
    assert path.read_text(encoding="utf-8") == "".join(lines[:kept])
    path.write_text("".join(lines), encoding="utf-8")  # restored: the appends go on
    written = await writer.write_once()
    assert written is not None and read_checkpoints(path)[-1] == written


async def test_a_file_moved_away_is_started_again_with_the_current_head(
    store: Store, tmp_path: Path
) -> None:
    """A checkpoint file moved away after a write is started again at the next round,
    with the current head even when the log has not grown since."""
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=3600)
    await submit(store)
    first = await writer.write_once()
    assert first is not None
    path.rename(tmp_path / "old.jsonl")
    assert await writer.write_once() is not None
    assert [c.seq for c in read_checkpoints(path)] == [first.seq]
    assert await writer.write_once() is None  # the new file holds the head


@respx.mock
async def test_a_url_receives_each_checkpoint_as_a_json_post(store: Store) -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(201))
    await submit(store)
    written = await Checkpointer(store, URL, seconds=3600).write_once()
    assert route.called and written is not None
    assert json.loads(route.calls.last.request.content) == json.loads(written.to_json())


@respx.mock
async def test_a_refusing_url_is_logged_and_tried_again(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    respx.post(URL).mock(side_effect=[httpx.Response(503), httpx.Response(200)])
    await submit(store)
    writer = Checkpointer(store, URL, seconds=3600)
    with caplog.at_level(logging.ERROR, logger="sre_judge.audit"):
        assert await writer.write_once() is None
    assert "did not take the checkpoint: HTTP 503" in caplog.text
    assert await writer.write_once() is not None
    respx.post(URL).mock(side_effect=httpx.ConnectError("down"))
    with pytest.raises(CheckpointError, match="cannot POST"):
        await publish_checkpoint(writer.last, URL)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@respx.mock
async def test_a_witness_answering_a_redirect_has_not_taken_the_checkpoint(
    store: Store, status: int
) -> None:
    """A redirect is not followed: the witness stored nothing, and the command says so
    (exit 1) instead of reporting the checkpoint written."""
    moved = "https://witness.example/moved"
    route = respx.post(URL).mock(return_value=httpx.Response(status, headers={"Location": moved}))
    await submit(store)
    done = await _checkpoint_command(store, "--out", URL)
    assert route.call_count == 1
    assert done.exit_code == 1, done.output
    assert f"did not take the checkpoint: HTTP {status} (to {moved})" in done.output
    assert "written to" not in done.output


@respx.mock
async def test_a_witness_url_is_a_url_whatever_the_case_of_its_scheme(
    store: Store, tmp_path: Path
) -> None:
    """``HTTPS://`` is a URL (schemes are case-insensitive): the checkpoint is POSTed
    there, never written to a local file of that name."""
    route = respx.post(URL).mock(return_value=httpx.Response(201))
    await submit(store)
    shouted = URL.replace("https://", "HTTPS://")
    work = tmp_path / "cwd"
    work.mkdir()
    done = await _checkpoint_command(store, "--out", shouted, cwd=work)
    assert done.exit_code == 0, done.output
    assert route.call_count == 1
    assert _files_under(work) == []


def _files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


async def test_serve_writes_checkpoints_to_the_configured_file(
    api_client: Any, tokens: Any, tmp_path: Path
) -> None:
    path = tmp_path / "checkpoints.jsonl"
    admin = await tokens("admin")
    async with api_client(audit_checkpoint=str(path), audit_checkpoint_seconds=3600) as client:
        created = await client.post(
            "/v1/tokens", headers=admin, json={"name": "a", "role": "submitter"}
        )
        assert created.status_code == 201
    found = read_checkpoints(path)
    assert found and found[-1].rows >= 2  # the admin token, the rubric versions, the new token


async def test_serve_writes_checkpoints_by_default(
    api_client: Any, tokens: Any, database_url: str
) -> None:
    """Without SRE_JUDGE_AUDIT_CHECKPOINT, checkpoints go to the default file: beside a
    SQLite database, beside the service key for PostgreSQL; ``off`` turns them off."""
    settings = Settings(database_url=database_url)
    path = Path(checkpoint_target(settings) or "")
    expected = default_checkpoint_file(database_url, settings.secret_key_file)
    assert path == expected and path.name.endswith(".checkpoints.jsonl")
    if database_url.startswith("sqlite"):
        assert path == Path(make_url(database_url).database + ".checkpoints.jsonl")
    else:
        assert path.parent == settings.secret_key_file.parent
    admin = await tokens("admin")
    async with api_client(audit_checkpoint_seconds=3600) as client:
        created = await client.post(
            "/v1/tokens", headers=admin, json={"name": "a", "role": "submitter"}
        )
        assert created.status_code == 201
    found = read_checkpoints(path)
    assert found and found[-1].rows >= 2
    assert checkpoint_target(Settings(database_url=database_url, audit_checkpoint="off")) is None
    memory = Settings(database_url="sqlite:///:memory:")
    assert checkpoint_target(memory) is None
