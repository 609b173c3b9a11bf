"""The append-only audit log: a keyed hash chain, the gradings' state it covers, checkpoints.

``chain`` appends rows, ``state`` digests gradings and their answers, ``verify`` checks
both, ``checkpoint`` signs the chain head for keeping outside the database.
"""

from __future__ import annotations

from storage.audit.chain import (
    AUDIT_LOCK_KEY,
    GENESIS_HASH,
    KEYED_PREFIX,
    AuditEntry,
    ChainKey,
    append_event,
    append_events,
    hash_key_id,
    row_hash,
)
from storage.audit.checkpoint import (
    Checkpoint,
    CheckpointError,
    check_checkpoint,
    make_checkpoint,
    sign_checkpoint,
)
from storage.audit.state import COVERS, grading_digests, state_digest, values_digest
from storage.audit.verify import ChainReport, verify_chain

__all__ = [
    "AUDIT_LOCK_KEY",
    "COVERS",
    "GENESIS_HASH",
    "KEYED_PREFIX",
    "AuditEntry",
    "ChainKey",
    "ChainReport",
    "Checkpoint",
    "CheckpointError",
    "append_event",
    "append_events",
    "check_checkpoint",
    "grading_digests",
    "hash_key_id",
    "make_checkpoint",
    "row_hash",
    "sign_checkpoint",
    "state_digest",
    "values_digest",
    "verify_chain",
]
