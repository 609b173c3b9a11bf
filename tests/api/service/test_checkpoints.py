"""Checkpoints written by ``serve``: to a JSON Lines file (older kept) or POSTed to a URL."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from api.service import checkpoints
from api.service.checkpoints import (
    Checkpointer,
    append_checkpoint,
    checkpoint_target,
    default_checkpoint_file,
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
    # no temporary file is left (the lock file stays)
    assert sorted(p.name for p in path.parent.iterdir()) == [
        ".checkpoints.jsonl.lock",
        "checkpoints.jsonl",
    ]


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


async def test_a_database_away_skips_a_checkpoint_and_the_loop_goes_on(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database not answering (an outage) raised out of the loop: no checkpoint was
    written again until a restart, and the shutdown's last write raised too."""
    path = tmp_path / "checkpoints.jsonl"
    writer = Checkpointer(store, str(path), seconds=0.01)
    real = checkpoints.make_checkpoint

    async def away(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("SELECT 1", {}, Exception("unable to open database file"))

    monkeypatch.setattr(checkpoints, "make_checkpoint", away)
    writer.start()
    await submit(store)
    await asyncio.sleep(0.05)  # rounds fail while it is away
    monkeypatch.setattr(checkpoints, "make_checkpoint", real)
    await asyncio.sleep(0.05)  # and go on once it is back
    await writer.stop()
    assert read_checkpoints(path)[-1].seq == 2


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
    assert "refused the checkpoint: HTTP 503" in caplog.text
    assert await writer.write_once() is not None
    respx.post(URL).mock(side_effect=httpx.ConnectError("down"))
    with pytest.raises(CheckpointError, match="cannot POST"):
        await publish_checkpoint(writer.last, URL)  # type: ignore[arg-type]


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
