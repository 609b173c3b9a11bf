"""Writing signed checkpoints of the audit log's head outside the database.

A target is a file (JSON Lines: each checkpoint is appended in one write, older ones
are kept and never rewritten, so an append-only file, such as a witness's mount that lets
this host append but not rewrite, takes it) or an ``http(s)`` URL that receives each
checkpoint as a JSON POST (anything but a 2xx answer has not taken it). ``serve`` writes one every
``SRE_JUDGE_AUDIT_CHECKPOINT_SECONDS`` when the log has grown (:class:`Checkpointer`);
``sre-judge audit checkpoint`` writes one on demand.

Checkpoints are on by default (:func:`checkpoint_target`): without
``SRE_JUDGE_AUDIT_CHECKPOINT`` they go to a file beside a SQLite database
(``<database>.checkpoints.jsonl``), or for PostgreSQL beside the service key file
(``<key folder>/<database name>.checkpoints.jsonl``, outside the database's reach as the
key must be); ``off`` turns them off.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from api.service.background import BackgroundTask
from api.service.settings import mask_passwords
from judge.backends.http import tls_context
from storage import Checkpoint, CheckpointError, Store, make_checkpoint

if TYPE_CHECKING:
    from collections.abc import Sequence

    from api.service.settings import Settings

__all__ = [
    "CHECKPOINTS_OFF",
    "Checkpointer",
    "append_checkpoint",
    "checkpoint_target",
    "default_checkpoint_file",
    "is_url",
    "newest_checkpoint",
    "publish_checkpoint",
    "read_checkpoints",
    "write_checkpoint",
]

log = logging.getLogger("sre_judge.audit")

#: the ``SRE_JUDGE_AUDIT_CHECKPOINT`` value that turns checkpoints off
CHECKPOINTS_OFF = "off"
_SUFFIX = ".checkpoints.jsonl"


def default_checkpoint_file(database_url: str, key_file: Path) -> Path | None:
    """Where checkpoints go when none is configured: beside a SQLite database file, or
    beside the service key file for a server database; None for an in-memory database."""
    url = make_url(database_url)
    name = url.database or ""
    if url.get_backend_name() == "sqlite":
        if name in ("", ":memory:") or name.startswith("file:"):
            return None
        return Path(name + _SUFFIX)
    return key_file.parent / f"{name or 'sre-judge'}{_SUFFIX}"


def checkpoint_target(settings: Settings) -> str | None:
    """The configured checkpoint target (a file or a URL), else the default file; None
    when checkpoints are turned off (``off``) or the database is in memory."""
    configured = (settings.audit_checkpoint or "").strip()
    if configured.lower() == CHECKPOINTS_OFF:
        return None
    if configured:
        return configured
    found = default_checkpoint_file(settings.database_url, settings.secret_key_file)
    return None if found is None else str(found)


def is_url(target: str) -> bool:
    """True for an ``http(s)`` URL (its scheme in any case), False for a file path."""
    return target[:8].lower().startswith(("http://", "https://"))


def read_checkpoints(path: Path) -> list[Checkpoint]:
    """The checkpoints of a JSON Lines file, oldest first; CheckpointError naming the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CheckpointError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        at = exc.object[: exc.start].count(b"\n") + 1
        raise CheckpointError(f"{path} line {at}: not UTF-8") from None
    found = []
    for number, line in enumerate(lines, start=1):
        if line.strip():
            try:
                found.append(Checkpoint.from_json(line))
            except CheckpointError as exc:
                raise CheckpointError(f"{path} line {number}: {exc}") from None
    return found


def append_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Append one line to ``path`` in one write (older lines kept, never rewritten).

    Writers of several processes take turns on a lock of the file itself, so no line is
    lost or interleaved; a file that cannot be written is a CheckpointError naming it.
    """
    line = checkpoint.to_json().encode() + b"\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        with os.fdopen(descriptor, "r+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            # a last line left without its newline (a writer cut off) is not joined to ours
            end = handle.seek(0, os.SEEK_END)
            if end and os.pread(handle.fileno(), 1, end - 1) != b"\n":
                line = b"\n" + line
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise CheckpointError(f"cannot write the checkpoint to {path}: {exc.strerror}") from None


async def publish_checkpoint(
    checkpoint: Checkpoint, target: str, *, client: httpx.AsyncClient | None = None
) -> None:
    """Write ``checkpoint`` to a file or POST it to a URL; CheckpointError when refused."""
    if not is_url(target):
        await asyncio.to_thread(append_checkpoint, Path(target), checkpoint)
        return
    owned = client is None
    http = client or httpx.AsyncClient(timeout=10.0, verify=tls_context())
    try:
        response = await http.post(
            target,
            content=checkpoint.to_json(),
            headers={"content-type": "application/json"},
        )
    except httpx.HTTPError as exc:
        shown = mask_passwords(target)
        raise CheckpointError(f"cannot POST the checkpoint to {shown}: {exc}") from None
    finally:
        if owned:
            await http.aclose()
    if not response.is_success:  # a redirect is not followed: nothing was taken
        moved = response.headers.get("location") if response.is_redirect else None
        where = f" (to {mask_passwords(moved)})" if moved else ""
        raise CheckpointError(
            f"{mask_passwords(target)} did not take the checkpoint: "
            f"HTTP {response.status_code}{where}"
        )


def newest_checkpoint(checkpoints: Sequence[Checkpoint]) -> Checkpoint | None:
    """The checkpoint of the highest ``seq`` (of equal ones the latest ``time``, then the
    last in the file); None for none.

    Not the last line: with ``serve --processes N`` each process signs its head and
    appends afterwards, so a process that signed an older head can append after one
    that signed a newer head. Times are all written in one UTC format, so they compare
    as text.
    """
    if not checkpoints:
        return None
    ranked = max(enumerate(checkpoints), key=lambda at: (at[1].seq, at[1].time, at[0]))
    return ranked[1]


def _newest_in_file(target: str) -> Checkpoint | None:
    if is_url(target) or not Path(target).exists():
        return None
    return newest_checkpoint(read_checkpoints(Path(target)))


def _held_by_file(target: str, known: Checkpoint | None) -> Checkpoint | None:
    """The newest checkpoint of the file ``target``, read afresh; None when there is no
    such file (never written, or moved away: a new one is started).

    CheckpointError naming the file (and line) when a line is not a checkpoint, or when
    the file holds nothing as new as ``known``, the newest it was seen to hold: its
    checkpoints were removed (emptied, or cut back to older lines), and nothing is
    appended until they are restored or the file is moved away.
    """
    newest = _newest_in_file(target)
    if known is None or (newest is not None and newest.seq >= known.seq):
        return newest
    if not Path(target).exists():
        return None
    holds = "no checkpoint" if newest is None else f"checkpoints up to row {newest.seq} only"
    raise CheckpointError(
        f"{target} holds {holds}, but held one of row {known.seq}: checkpoints were removed"
        " from it (restore them or move the file away)"
    )


async def write_checkpoint(
    store: Store, target: str | None, *, previous: Checkpoint | None = None
) -> Checkpoint:
    """Sign the head (after checking the log extends the previous checkpoint) and write it.

    The previous checkpoint is ``previous``, else the newest in the target file. With
    ``target`` None the checkpoint is only returned.
    """
    if previous is None and target is not None:
        previous = await asyncio.to_thread(_newest_in_file, target)
    checkpoint = await make_checkpoint(
        store.engine, store.db.key, at=store.db.clock(), previous=previous
    )
    if target is not None:
        await publish_checkpoint(checkpoint, target)
    return checkpoint


class Checkpointer(BackgroundTask):
    """Writes a checkpoint to ``target`` every ``seconds`` while the log grows (the first
    one at once).

    A file target is read afresh each round: a line that is not a checkpoint, or
    checkpoints removed from it, stop the round whenever they appear; a file moved away
    is started again with the current head.
    """

    task_name = "audit-checkpoints"

    def __init__(self, store: Store, target: str, seconds: float) -> None:
        super().__init__()
        self.store, self.target, self.seconds = store, target, seconds
        #: the newest checkpoint the target was seen to hold (written by this process, or
        #: read from the file); the next one is checked to extend it
        self.last: Checkpoint | None = None

    async def stop(self) -> None:
        """Stop the periodic writes, then write a last checkpoint of the final head."""
        if self._task is None:
            return
        await super().stop()
        await self.write_once()

    async def write_once(self) -> Checkpoint | None:
        """Write one checkpoint unless the target holds the head already; errors are
        logged, never raised, so neither the loop nor a shutdown's last write ends on one."""
        try:
            held = (  # what the target holds now: a file may have changed since the last round
                self.last
                if is_url(self.target)
                else await asyncio.to_thread(_held_by_file, self.target, self.last)
            )
            checkpoint = await make_checkpoint(
                self.store.engine,
                self.store.db.key,
                at=self.store.db.clock(),
                previous=held or self.last,
            )
            if held is not None and checkpoint.seq == held.seq:
                self.last = held
                return None
            await publish_checkpoint(checkpoint, self.target)
        except (CheckpointError, OSError, SQLAlchemyError) as exc:  # the database away too:
            # the next round tries again; the loop (and a shutdown's last write) go on
            log.error("audit checkpoint not written: %s", exc)
            return None
        except Exception:  # unforeseen: logged with its traceback, and the loop goes on
            log.exception("audit checkpoint not written")
            return None
        self.last = checkpoint
        log.info("audit checkpoint written: seq %d", checkpoint.seq)
        return checkpoint

    async def _loop(self) -> None:
        while True:
            await self.write_once()
            await asyncio.sleep(self.seconds)
