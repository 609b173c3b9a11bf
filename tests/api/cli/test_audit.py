"""``sre-judge audit verify`` and ``audit checkpoint`` as an operator runs them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import delete, update
from sqlalchemy.engine import Engine

from api.cli.main import main
from api.service.checkpoints import checkpoint_target, read_checkpoints
from api.service.settings import Settings
from storage import CheckpointError, Store, make_checkpoint
from storage.audit import ROWS
from tests.storage.audit_helpers import AUDIT, GRADINGS, execute, rehash_from, rows, workload

#: the engine matters here: run on PostgreSQL too under ``--db all``
pytestmark = pytest.mark.postgres


async def audit(
    database_url: str, *args: str, key_file: str | None = None, checkpoints: str | None = None
) -> Result:
    """Run ``sre-judge audit ARGS`` in a thread (it runs its own event loop)."""
    env = {"SRE_JUDGE_DATABASE_URL": database_url}
    if key_file is not None:
        env["SRE_JUDGE_SECRET_KEY_FILE"] = key_file
    if checkpoints is not None:
        env["SRE_JUDGE_AUDIT_CHECKPOINT"] = checkpoints
    runner = CliRunner()
    return await asyncio.to_thread(runner.invoke, main, ["audit", *args], env=env)


async def test_verify_reports_an_intact_log_and_the_gradings_checked(
    store: Store, database_url: str
) -> None:
    ids = await workload(store)
    done = await audit(database_url, "verify")
    assert done.exit_code == 0, done.output
    assert "audit chain intact: 58 rows checked" in done.output
    assert f"gradings' state: {len(ids)} checked" in done.output


async def test_verify_exits_1_naming_an_edited_verdict(store: Store, database_url: str) -> None:
    ids = await workload(store)
    await execute(store.engine, update(GRADINGS).where(GRADINGS.c.id == ids[2]).values(passed=True))
    done = await audit(database_url, "verify")
    assert done.exit_code == 1
    assert f"state broken: grading {ids[2]} differs" in done.output


async def test_verify_exits_1_naming_the_broken_row(store: Store, database_url: str) -> None:
    await workload(store)
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq == 7))
    done = await audit(database_url, "verify")
    assert done.exit_code == 1 and "audit log broken at row 7" in done.output


async def test_verify_needs_the_key_and_never_creates_one(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    await workload(store)
    missing = tmp_path / "nope.key"
    done = await audit(database_url, "verify", key_file=str(missing))
    assert done.exit_code == 2 and "no service key" in done.output
    assert not missing.exists()
    other = tmp_path / "other.key"
    other.write_text("x" * 64)
    done = await audit(database_url, "verify", key_file=str(other))
    assert done.exit_code == 1 and "not with the configured key" in done.output


async def test_checkpoints_are_appended_and_checked(
    store: Store, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    await workload(store)
    file = tmp_path / "checkpoints.jsonl"
    first = await audit(database_url, "checkpoint", "--out", str(file))
    assert first.exit_code == 0, first.output
    await store.tokens.create(name="later", role="submitter")
    second = await audit(database_url, "checkpoint", "--out", str(file))
    assert second.exit_code == 0, second.output
    lines = [json.loads(line) for line in file.read_text().splitlines()]
    assert [c["seq"] for c in lines] == [58, 59]
    done = await audit(database_url, "verify", "--checkpoint", str(file))
    assert done.exit_code == 0, done.output
    assert "checkpoint holds: row 59" in done.output
    # truncated back past the newest checkpoint: the chain itself still verifies
    await execute(engine, delete(AUDIT).where(AUDIT.c.seq == 59))
    assert (await audit(database_url, "verify")).exit_code == 0
    done = await audit(database_url, "verify", "--checkpoint", str(file))
    assert done.exit_code == 1
    assert "checkpoint of row 59" in done.output and "deleted back past" in done.output
    # and no new checkpoint is signed over it
    refused = await audit(database_url, "checkpoint", "--out", str(file))
    assert refused.exit_code == 1 and "previous checkpoint does not hold" in refused.output
    assert len(file.read_text().splitlines()) == 2


async def test_the_newest_checkpoint_is_the_highest_not_the_last_line(
    store: Store, engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """With ``serve --processes N`` each process signs its head and appends it afterwards,
    so the file can end with an older checkpoint than one above it. ``verify`` holds the
    log to the checkpoint of the highest row wherever it stands, and no new checkpoint is
    signed over a log rolled back past it."""
    await workload(store)
    older = await make_checkpoint(engine, store.db.key, at=store.db.clock())
    for n in range(3):
        await store.tokens.create(name=f"t{n}", role="submitter")
    newer = await make_checkpoint(engine, store.db.key, at=store.db.clock(), previous=older)
    assert newer.seq == older.seq + 3
    file = tmp_path / "checkpoints.jsonl"
    file.write_text(newer.to_json() + "\n" + older.to_json() + "\n")
    held = await audit(database_url, "verify", "--checkpoint", str(file))
    assert held.exit_code == 0, held.output
    assert f"checkpoint holds: row {newer.seq}" in held.output
    # rolled back past the newer checkpoint, not past the older one
    await execute(engine, delete(AUDIT).where(AUDIT.c.seq > older.seq))
    done = await audit(database_url, "verify", "--checkpoint", str(file))
    assert done.exit_code == 1, done.output
    assert f"checkpoint of row {newer.seq}" in done.output
    refused = await audit(database_url, "checkpoint", "--out", str(file))
    assert refused.exit_code == 1 and "previous checkpoint does not hold" in refused.output


async def test_a_checkpoint_with_checkpoints_off_is_printed(
    store: Store, database_url: str
) -> None:
    await workload(store)
    done = await audit(database_url, "checkpoint", checkpoints="off")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["seq"] == 58
    checked = await audit(database_url, "verify", checkpoints="off")
    assert checked.exit_code == 0, checked.output
    assert "no checkpoint checked: checkpoints are off" in checked.output


@pytest.mark.parametrize("out", ["s3://audit-bucket/cp.jsonl", "htps://witness.example/cp", "off"])
async def test_checkpoint_out_takes_a_file_or_an_http_url_only(
    store: Store, database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, out: str
) -> None:
    """``--out`` takes the targets ``SRE_JUDGE_AUDIT_CHECKPOINT`` takes but ``off``: a URL
    of another scheme (which would be written to a local folder named after it) and
    ``off`` (a file named ``off``) are bad usage naming ``--out``, and nothing is written."""
    await workload(store)
    monkeypatch.chdir(tmp_path)
    before = sorted(await asyncio.to_thread(os.listdir, tmp_path))
    done = await audit(database_url, "checkpoint", "--out", out)
    assert done.exit_code == 2 and "--out" in done.output, done.output
    assert sorted(await asyncio.to_thread(os.listdir, tmp_path)) == before


async def test_checkpoints_go_to_a_default_file_that_verify_checks(
    store: Store, database_url: str
) -> None:
    """Unconfigured, a checkpoint goes to the default file (beside a SQLite database, or
    beside the key for PostgreSQL), and verify checks it without --checkpoint: rolling
    the log back to before it (a restored backup) fails."""
    await workload(store)
    target = checkpoint_target(Settings(database_url=database_url))
    assert target is not None and target.endswith(".checkpoints.jsonl")
    written = await audit(database_url, "checkpoint")
    assert written.exit_code == 0, written.output
    assert f"checkpoint of row 58 written to {target}" in written.output
    assert len(read_checkpoints(Path(target))) == 1
    intact = await audit(database_url, "verify")
    assert intact.exit_code == 0 and "checkpoint holds: row 58" in intact.output
    await execute(store.engine, delete(AUDIT).where(AUDIT.c.seq > 40))
    rolled_back = await audit(database_url, "verify")
    assert rolled_back.exit_code == 1
    assert "checkpoint of row 58" in rolled_back.output
    assert "rows were deleted back past the checkpoint" in rolled_back.output


@pytest.mark.parametrize("damage", ["", "not json\n"], ids=["emptied", "garbled"])
async def test_a_damaged_default_checkpoint_file_is_a_broken_check(
    store: Store, database_url: str, damage: str
) -> None:
    """The file serve writes checkpoints to, emptied or garbled (what hides a rollback
    of the log), fails verify as broken (exit 1 naming the file), not as a usage error
    about an option the operator never gave; the chain is still walked and reported."""
    await workload(store)
    target = checkpoint_target(Settings(database_url=database_url))
    assert target is not None
    assert (await audit(database_url, "checkpoint")).exit_code == 0
    await asyncio.to_thread(Path(target).write_text, damage)
    done = await audit(database_url, "verify")
    assert done.exit_code == 1, done.output
    assert "audit chain intact" in done.output
    assert "checkpoint file broken" in done.output and Path(target).name in done.output
    assert "--checkpoint" not in done.output


async def test_an_unreadable_checkpoint_file_is_bad_usage(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    file = tmp_path / "bad.jsonl"
    file.write_text("not json\n")
    done = await audit(database_url, "verify", "--checkpoint", str(file))
    assert done.exit_code == 2 and "line 1" in done.output


async def test_a_checkpoint_line_with_a_field_of_the_wrong_type_is_bad_usage_naming_it(
    store: Store, database_url: str, tmp_path: Path
) -> None:
    """A line whose fields have the wrong JSON types is refused like any unreadable
    line: exit 2 naming the file, the line and the field."""
    written = await make_checkpoint(store.engine, store.db.key, at=store.db.clock())
    file = tmp_path / "garbled.jsonl"
    garbled = {**json.loads(written.to_json()), "signature": 5}
    file.write_text(written.to_json() + "\n" + json.dumps(garbled) + "\n")
    done = await audit(database_url, "verify", "--checkpoint", str(file))
    assert done.exit_code == 2, done.output
    assert "line 2: not a checkpoint: signature must be text" in done.output
    assert file.name in done.output and "unexpected" not in done.output


async def test_backfill_adopts_what_an_older_version_wrote(store: Store, database_url: str) -> None:
    """Records written before the log covered them fail verify until `audit backfill`."""
    await workload(store)
    await execute(
        store.engine,
        *(
            update(AUDIT)
            .where(AUDIT.c.seq == row.seq)
            .values(payload={k: v for k, v in row.payload.items() if k != ROWS})
            for row in await rows(store.engine)
        ),
    )
    await rehash_from(store.engine, 1, store.db.chain_key)
    refused = await audit(database_url, "verify")
    assert refused.exit_code == 1
    assert "records written before the audit log covered them" in refused.output
    adopted = await audit(database_url, "backfill")
    assert adopted.exit_code == 0, adopted.output
    assert "adopted 0 legacy rows, 0 gradings and" in adopted.output
    intact = await audit(database_url, "verify")
    assert intact.exit_code == 0, intact.output
    assert "older records not covered" not in intact.output


def test_a_checkpoint_file_that_is_not_utf8_names_its_line(tmp_path: Path) -> None:
    """Not 'unexpected UnicodeDecodeError' from the fallback handler: the file and line."""
    path = tmp_path / "checkpoints.jsonl"
    path.write_bytes(b"\n\xff\xfe not a checkpoint\n")
    with pytest.raises(CheckpointError, match="line 2: not UTF-8"):
        read_checkpoints(path)
