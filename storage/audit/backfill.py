"""Adopting what an older version wrote: legacy rows, gradings and records without digests.

A database written before the chain was keyed, or before it covered gradings and the
evidentiary records (``storage.audit.records``), holds rows that ``verify`` cannot
check and therefore refuses (see ``storage.audit.verify``). :func:`backfill`, run once
with the service key after the upgrade, appends keyed ``audit.backfilled`` events that
state the number of legacy rows and carry the digests of every grading and record
written before coverage began, as they now stand. From then on an edit of any of them
is named as for any other row.

It adopts only what predates coverage: a grading or record created after the chain
began covering its kind, whose audit rows are gone, stays a problem (backfilling it
would launder a deletion). Whoever runs it vouches for the rows as they are, so run it
right after the upgrade, and keep a checkpoint of the log from before.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from storage.audit.records import COVERED_TABLES, RecordRow, record_key, table_rows
from storage.audit.state import answers_by_grading, state_digest
from storage.audit.verify import BACKFILL_EVENT, LEGACY_ROWS, ChainWalk, walk_chain
from storage.database import Database
from storage.tables import GradingRecord

__all__ = ["BackfillError", "BackfillReport", "backfill"]

_GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]
#: rows covered by one backfill event
_PER_EVENT = 500


class BackfillError(RuntimeError):
    """The log is broken: nothing is adopted over a broken chain."""


@dataclass(frozen=True)
class BackfillReport:
    """What one backfill adopted."""

    legacy_rows: int
    gradings: int
    records: int
    events: int


async def backfill(db: Database, *, actor: str = "cli", batch_size: int = 500) -> BackfillReport:
    """Adopt the legacy rows and cover every grading and record that predates coverage.

    One transaction; BackfillError when the chain is broken. Writes nothing when there
    is nothing to adopt.
    """
    return await db.run(_adopt, db, actor, batch_size)


def _adopt(session: Session, db: Database, actor: str, batch_size: int) -> BackfillReport:
    """The backfill, in the write transaction of ``session``."""
    connection = session.connection()
    walk = ChainWalk(db.chain_key)
    broken = walk_chain(connection, walk, batch_size=batch_size)
    if broken is not None:
        raise BackfillError(f"the audit log is broken at row {broken[0]}: {broken[1]}")
    gradings = _uncovered_gradings(connection, walk, batch_size)
    records = _uncovered_records(connection, walk, batch_size)
    legacy_pending = walk.legacy > 0 and walk.adopted_legacy != walk.legacy
    if not gradings and not records and not legacy_pending:
        return BackfillReport(walk.legacy, 0, 0, 0)
    items: list[tuple[str, Any]] = [("grading", g) for g in gradings.items()]
    items += [("record", r) for r in records]
    chunks = [items[i : i + _PER_EVENT] for i in range(0, len(items), _PER_EVENT)] or [[]]
    events, covers, rows = [], {}, {}
    for index, chunk in enumerate(chunks):
        events.append(
            {
                "event": BACKFILL_EVENT,
                "entity_type": "audit",
                "entity_id": "backfill",
                "actor": actor,
                "payload": {LEGACY_ROWS: walk.legacy, "part": index + 1, "of": len(chunks)},
            }
        )
        covers[index] = dict(item for kind, item in chunk if kind == "grading")
        rows[index] = [item for kind, item in chunk if kind == "record"]
    db.audit_many(session, events, covers, rows)
    return BackfillReport(walk.legacy, len(gradings), len(records), len(events))


def _uncovered_gradings(connection: Connection, walk: ChainWalk, batch_size: int) -> dict[str, str]:
    """Digests of the gradings that predate state coverage and have none in the chain."""
    found: dict[str, str] = {}
    last_id = None
    while True:
        query = select(_GRADINGS).order_by(_GRADINGS.c.id).limit(batch_size)
        if last_id is not None:
            query = query.where(_GRADINGS.c.id > last_id)
        batch = connection.execute(query).all()
        if not batch:
            return found
        wanted = [
            row
            for row in batch
            if row.id not in walk.covered and walk.predates_grading_state(row.created_at)
        ]
        answers = answers_by_grading(connection, [r.id for r in wanted])
        for row in wanted:
            found[row.id] = state_digest(row, answers.get(row.id, ()))
        last_id = batch[-1].id


def _uncovered_records(connection: Connection, walk: ChainWalk, batch_size: int) -> list[RecordRow]:
    """The records that predate record coverage and have no digest in the chain."""
    found: list[RecordRow] = []
    for name, table in COVERED_TABLES.items():
        covered = walk.records.get(name, {})
        for batch in table_rows(connection, table, batch_size=batch_size):
            for row in batch:
                values = row._mapping
                if record_key(table, values) in covered:
                    continue
                if walk.predates_record_state(values.get("created_at")):
                    found.append((table, dict(values)))
    return found
