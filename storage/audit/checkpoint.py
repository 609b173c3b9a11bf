"""Signed checkpoints of the chain head, kept outside the database.

As Certificate Transparency's signed tree heads and Sigstore Rekor's checkpoints, a
checkpoint is a small signed statement: "the log held ``rows`` rows, the row at ``seq``
has hash ``head_hash``", with the time and the id of the key that signed it (an HMAC
with the service key's ``"checkpoint"`` key). Kept where the database's writers cannot
reach, it pins the head: deleting rows back past it, or replacing the log wholesale,
no longer matches it (:func:`check_checkpoint`).

A new checkpoint is only signed after the rows since the previous one (or the whole
log, for the first) are checked to extend it: a consistency check, so no checkpoint
ever vouches for a rewritten history.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from storage.audit.chain import ChainKey, hash_key_id
from storage.audit.verify import ChainWalk, snapshot, walk_chain
from storage.canonical import canonical_json, iso_utc
from storage.keys import ServiceKey
from storage.tables import AuditRecord

__all__ = [
    "Checkpoint",
    "CheckpointError",
    "check_checkpoint",
    "checkpoint_problem",
    "make_checkpoint",
    "sign_checkpoint",
    "sign_head",
]

_AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]
_LOG = "sre-judge audit log"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, signed or trusted; the message says why."""


@dataclass(frozen=True)
class Checkpoint:
    """One signed statement of the chain head."""

    key_id: str
    seq: int
    head_hash: str
    rows: int
    time: str
    signature: str
    log: str = _LOG

    def to_json(self) -> str:
        """One line of canonical JSON."""
        return canonical_json(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Checkpoint:
        """Parse one checkpoint; CheckpointError when it is not one."""
        try:
            data = json.loads(text)
            checkpoint = cls(**data)
        except (ValueError, TypeError) as exc:
            raise CheckpointError(f"not a checkpoint: {exc}") from None
        except RecursionError:
            raise CheckpointError("not a checkpoint: nested too deeply") from None
        fault = _type_fault(checkpoint)
        if fault is not None:
            raise CheckpointError(f"not a checkpoint: {fault}")
        return checkpoint


#: the JSON names of what :func:`json.loads` gives, for a refusal a user can read
_JSON_TYPES = {
    bool: "a boolean",
    int: "a number",
    float: "a number",
    str: "text",
    type(None): "null",
    list: "an array",
    dict: "an object",
}


def _type_fault(checkpoint: Checkpoint) -> str | None:
    """Which field has the wrong JSON type, or None when all are right.

    ``seq`` and ``rows`` are integers (``true`` is not one); the other fields are
    ASCII text, as every signed checkpoint's are, so that comparing, signing and
    ordering checkpoints never fails on a garbled line.
    """
    for name in ("seq", "rows"):
        value = getattr(checkpoint, name)
        if type(value) is not int:
            return f"{name} must be an integer, not {_JSON_TYPES.get(type(value), 'that')}"
    for name in ("key_id", "head_hash", "time", "signature", "log"):
        value = getattr(checkpoint, name)
        if type(value) is not str:
            return f"{name} must be text, not {_JSON_TYPES.get(type(value), 'that')}"
        if not value.isascii():
            return f"{name} must be ASCII text"
    return None


def _signature(key: ServiceKey, body: dict[str, Any]) -> str:
    mac = hmac.new(key.derive("checkpoint"), canonical_json(body).encode(), hashlib.sha256)
    return "hmac-sha256:" + mac.hexdigest()


def _body(checkpoint: Checkpoint) -> dict[str, Any]:
    return {k: v for k, v in asdict(checkpoint).items() if k != "signature"}


def sign_checkpoint(
    key: ServiceKey, *, seq: int, head_hash: str, rows: int, at: datetime
) -> Checkpoint:
    """A checkpoint of the head ``seq``/``head_hash`` signed with ``key``."""
    unsigned = Checkpoint(
        key_id=key.key_id, seq=seq, head_hash=head_hash, rows=rows, time=iso_utc(at), signature=""
    )
    return Checkpoint(**{**asdict(unsigned), "signature": _signature(key, _body(unsigned))})


async def make_checkpoint(
    engine: Engine,
    key: ServiceKey,
    *,
    at: datetime,
    previous: Checkpoint | None = None,
) -> Checkpoint:
    """:func:`sign_head` in a worker thread, so the event loop never waits for it."""
    return await asyncio.to_thread(sign_head, engine, key, at=at, previous=previous)


def sign_head(
    engine: Engine, key: ServiceKey, *, at: datetime, previous: Checkpoint | None = None
) -> Checkpoint:
    """Check that the log extends ``previous`` (or the whole log), then sign its head.

    CheckpointError when ``previous`` does not hold or the rows since are broken. It
    blocks: from async code use :func:`make_checkpoint`.
    """
    if previous is not None:
        problem = checkpoint_problem(engine, key, previous)
        if problem is not None:
            raise CheckpointError(f"the previous checkpoint does not hold: {problem}")
    walk = ChainWalk(ChainKey.of(key))
    if previous is not None:
        walk.expected_seq, walk.prev_hash = previous.seq + 1, previous.head_hash
        walk.keyed = hash_key_id(previous.head_hash) is not None
    with snapshot(engine) as connection:
        broken = walk_chain(connection, walk)
        if broken is not None:
            raise CheckpointError(f"the audit log is broken at row {broken[0]}: {broken[1]}")
        rows = connection.execute(select(func.count()).select_from(_AUDIT)).scalar_one()
    return sign_checkpoint(
        key, seq=walk.expected_seq - 1, head_hash=walk.prev_hash, rows=int(rows), at=at
    )


async def check_checkpoint(engine: Engine, key: ServiceKey, checkpoint: Checkpoint) -> str | None:
    """:func:`checkpoint_problem` in a worker thread, so the event loop never waits for it."""
    return await asyncio.to_thread(checkpoint_problem, engine, key, checkpoint)


def checkpoint_problem(engine: Engine, key: ServiceKey, checkpoint: Checkpoint) -> str | None:
    """What is wrong with ``checkpoint`` against the log, or None when it holds.

    It holds when its signature is ``key``'s and the log still has the row at its
    ``seq`` with its ``head_hash`` and exactly its ``rows`` rows up to there. It blocks:
    from async code use :func:`check_checkpoint`.
    """
    if checkpoint.key_id != key.key_id:
        return f"signed with key {checkpoint.key_id}, not with the configured key {key.key_id}"
    if not hmac.compare_digest(checkpoint.signature, _signature(key, _body(checkpoint))):
        return "its signature does not match: the checkpoint was altered or forged"
    if checkpoint.seq == 0:
        return None
    with snapshot(engine) as connection:
        found = connection.execute(
            select(_AUDIT.c.hash).where(_AUDIT.c.seq == checkpoint.seq)
        ).scalar_one_or_none()
        count = select(func.count()).select_from(_AUDIT).where(_AUDIT.c.seq <= checkpoint.seq)
        rows = connection.execute(count).scalar_one()
    if found is None:
        return f"the log has no row {checkpoint.seq}: rows were deleted back past the checkpoint"
    if found != checkpoint.head_hash:
        return f"row {checkpoint.seq} has another hash: the log was rewritten or replaced"
    if rows != checkpoint.rows:
        return f"the log holds {rows} rows up to {checkpoint.seq}, the checkpoint {checkpoint.rows}"
    return None
