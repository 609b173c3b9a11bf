"""Tampering with the database as someone with write access but without the key would."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from storage import AnswerRecord, AuditRecord, GradingRecord, Store, verify_chain
from storage.audit import ChainKey, ChainReport, row_hash
from tests.storage.helpers import graded_result, override, sregym_rubric, submit

__all__ = ["ANSWERS", "AUDIT", "GRADINGS", "execute", "rehash_from", "rows", "verify", "workload"]

AUDIT = AuditRecord.__table__  # type: ignore[attr-defined]
GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]
ANSWERS = AnswerRecord.__table__  # type: ignore[attr-defined]
GRADED = 18


async def workload(store: Store) -> list[str]:
    """Graded submissions, one still pending, an override last: 58 audit rows.

    Returns the grading ids, the pending one last.
    """
    ids = []
    for _ in range(GRADED):
        outcome = await submit(store)
        ids.append(outcome.grading.id)
    await store.queue.claim_pending("w", limit=GRADED, lease_seconds=60)
    for grading_id in ids:
        await store.queue.complete(grading_id, "w", graded_result(["D1-Q1"]))
    await store.tokens.create(name="ci", role="submitter")
    ids.append((await submit(store)).grading.id)
    await override(
        store,
        ids[0],
        rubric=sregym_rubric(),
        expected_revision=2,
        kind="verdict",
        verdict="pass",
        reason="a human read it",
        author_id="adj",
        author_name="Ada",
    )
    return ids


async def rows(engine: Engine) -> list[Any]:
    """Every audit row in seq order."""
    with engine.connect() as connection:
        return list(connection.execute(select(AUDIT).order_by(AUDIT.c.seq)))


async def execute(engine: Engine, *statements: Any) -> None:
    """Run statements in one transaction, as someone with write access to the database."""
    with engine.begin() as connection:
        for statement in statements:
            connection.execute(statement)


async def verify(store: Store) -> ChainReport:
    """The report of a verifier holding the service key."""
    return await verify_chain(store.engine, key=store.db.chain_key)


async def rehash_from(
    engine: Engine, seq: int, key: ChainKey | None, *, until: int | None = None
) -> None:
    """Recompute ``prev_hash`` and ``hash`` of rows ``seq``..``until`` as a forger would."""
    found = await rows(engine)
    prev = found[seq - 2].hash if seq > 1 else "0" * 64
    statements = []
    for row in found[seq - 1 : until]:
        fields = {c: getattr(row, c) for c in row._fields if c not in ("hash", "prev_hash")}
        new_hash = row_hash(**fields, prev_hash=prev, key=key)
        statements.append(
            update(AUDIT).where(AUDIT.c.seq == row.seq).values(prev_hash=prev, hash=new_hash)
        )
        prev = new_hash
    await execute(engine, *statements)
