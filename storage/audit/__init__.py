"""The append-only audit log: a keyed hash chain, the gradings' state it covers, checkpoints.

``chain`` appends rows, ``state`` digests gradings and their answers, ``records`` the
evidentiary records (submissions, scenarios and their versions, overrides, labels,
tags, judge calls), ``verify`` checks all of them, ``checkpoint`` signs the chain head
for keeping outside the database, ``backfill`` adopts what older versions wrote.
"""

from __future__ import annotations

from storage.audit.chain import (
    AUDIT_LOCK_KEY,
    GENESIS_HASH,
    KEYED_PREFIX,
    AuditEntry,
    ChainKey,
    KeyMismatch,
    Link,
    append_event,
    append_events,
    hash_key_id,
    last_append,
    newest_key_id,
    row_hash,
)
from storage.audit.checkpoint import (
    Checkpoint,
    CheckpointError,
    check_checkpoint,
    make_checkpoint,
    sign_checkpoint,
)
from storage.audit.records import COVERED_TABLES, ROWS, record_digest, rows_payload
from storage.audit.state import COVERS, grading_digests, state_digest, values_digest
from storage.audit.verify import BACKFILL_EVENT, ChainReport, verify_chain

__all__ = [
    "AUDIT_LOCK_KEY",
    "BACKFILL_EVENT",
    "COVERED_TABLES",
    "COVERS",
    "GENESIS_HASH",
    "KEYED_PREFIX",
    "ROWS",
    "AuditEntry",
    "ChainKey",
    "ChainReport",
    "Checkpoint",
    "CheckpointError",
    "KeyMismatch",
    "Link",
    "append_event",
    "append_events",
    "check_checkpoint",
    "grading_digests",
    "hash_key_id",
    "last_append",
    "make_checkpoint",
    "newest_key_id",
    "record_digest",
    "row_hash",
    "rows_payload",
    "sign_checkpoint",
    "state_digest",
    "values_digest",
    "verify_chain",
]
