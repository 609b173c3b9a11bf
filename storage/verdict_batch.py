"""Storing a batch of verdicts in the caller's transaction, one statement per table.

:meth:`storage.queue.QueueRepository.complete_many` writes every verdict that workers
finished together (a group commit, or a batch of regrade items answered from the judge
cache) with a fixed number of statements, whatever the batch's size:

1. the lease check of the whole batch: one SELECT of the gradings (row-locked on
   PostgreSQL; SQLite's write lock is held already). A verdict whose grading is no
   longer pending or leased to its worker is not written. A batch of one verdict, the
   common case, folds the check into its grading's UPDATE (``WHERE`` the lease holds,
   ``RETURNING`` the row as written): one statement where two were;
2. one executemany per table: the gradings (UPDATE by id, their votes included),
   answers and judge calls (INSERT), judge cache entries;
3. one INSERT of the audit rows, chained in the order of the batch: each verdict's
   ``judge.call`` events, then its ``grading.completed``, whose state digest is
   computed from the values written (nothing is read back);
4. the regrade jobs' bookkeeping once per batch (``storage.regrade.lifecycle``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Update, bindparam, select, update
from sqlalchemy.orm import Session

from storage.audit import values_digest
from storage.audit.records import RecordRow
from storage.database import Database
from storage.judge_cache import insert_cache_rows
from storage.models import FinishedGrading
from storage.records import answer_rows, judge_call_rows, verdict_values
from storage.tables import AnswerRecord, GradingRecord, JudgeCallRecord
from storage.verdict_rows import (
    call_events,
    call_records,
    calls_before,
    completion_payload,
    insert_rows,
)

__all__ = ["StoredVerdicts", "leased_rows", "write_verdicts"]

_GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]
_ANSWERS = AnswerRecord.__table__  # type: ignore[attr-defined]
_CALLS = JudgeCallRecord.__table__  # type: ignore[attr-defined]
#: the batch's gradings by id (built once: an IN over a list cost more to build than run)
_LEASED = (
    select(_GRADINGS)
    .where(_GRADINGS.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(_GRADINGS.c.id)
)
_LEASED_LOCKED = _LEASED.with_for_update()
#: one verdict's UPDATE where its lease holds, returning the row as written
_LEASED_UPDATE = (
    update(_GRADINGS)
    .where(
        _GRADINGS.c.id == bindparam("b_id"),
        _GRADINGS.c.status == "pending",
        _GRADINGS.c.lease_owner == bindparam("b_worker"),
    )
    .returning(*_GRADINGS.c)
)


@dataclass
class StoredVerdicts:
    """What one batch wrote: which items, and the grading rows as they now stand."""

    #: per item of the batch, in order: whether it was written
    stored: list[bool] = field(default_factory=list)
    #: the written gradings' column values, in the order of the batch
    gradings: list[dict[str, Any]] = field(default_factory=list)


def leased_rows(
    db: Database, session: Session, items: Sequence[FinishedGrading]
) -> dict[str, Mapping[str, Any]]:
    """The batch's gradings by id, in one query, row-locked on PostgreSQL (in id order,
    so two batches that share a grading cannot deadlock)."""
    ids = sorted({item.grading_id for item in items})
    query = _LEASED_LOCKED if db.postgres else _LEASED
    return {row.id: dict(row._mapping) for row in session.execute(query, {"ids": ids})}


def _holds_lease(row: Mapping[str, Any], item: FinishedGrading) -> bool:
    return bool(row["status"] == "pending" and row["lease_owner"] == item.worker_id)


def _check_rubric(row: Mapping[str, Any], item: FinishedGrading) -> None:
    result = item.result
    if (result.rubric_id, result.rubric_version) != (row["rubric_id"], row["rubric_version"]):
        raise ValueError(
            f"result is for rubric {result.rubric_id}@{result.rubric_version}, "
            f"the grading for {row['rubric_id']}@{row['rubric_version']}"
        )


@dataclass
class _Rows:
    """The rows of every table for the batch, and its audit events, in order."""

    gradings: list[dict[str, Any]] = field(default_factory=list)
    #: the columns each grading's UPDATE sets (``verdict_values``), and its id
    updates: list[dict[str, Any]] = field(default_factory=list)
    answers: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    cache: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: audit event index -> {grading id: state digest}
    covers: dict[int, dict[str, str]] = field(default_factory=dict)
    #: audit event index -> the judge-call rows it covers
    records: dict[int, list[RecordRow]] = field(default_factory=dict)

    def add(
        self,
        row: Mapping[str, Any],
        item: FinishedGrading,
        calls: list[dict[str, Any]],
        at: datetime,
        *,
        written: Mapping[str, Any] | None = None,
    ) -> None:
        """Add one verdict whose grading is ``row`` as read under the lock, with its judge
        calls' rows; or, where its UPDATE ran already with the values ``written``, as
        that UPDATE returned it."""
        result, grading_id = item.result, item.grading_id
        if written is None:
            changed = _verdict_columns(item, at, row["revision"], calls)
            self.updates.append({"b_id": grading_id, **_bound(changed)})
        else:
            changed = {**written, "revision": row["revision"]}
        # the values as bound, over the row: SQLite's RETURNING gives a REAL column's
        # whole number as an integer, where a read gives a float
        values = {**row, **changed}
        answers = answer_rows(grading_id, result)
        self.gradings.append(values)
        self.answers.extend(answers)
        self.calls.extend(calls)
        self.cache.extend(item.cache_rows)
        self.records.update(call_records(calls, first_event=len(self.events)))
        self.events.extend(call_events(grading_id, item.worker_id, calls))
        self.covers[len(self.events)] = {grading_id: values_digest(values, answers)}
        completed = "grading.completed" if result.status == "graded" else "grading.unscored"
        self.events.append(
            {
                "event": completed,
                "entity_type": "grading",
                "entity_id": grading_id,
                "actor": item.worker_id,
                "payload": completion_payload(values, result, calls),
            }
        )


def _verdict_columns(
    item: FinishedGrading, at: datetime, revision: int, calls: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The grading columns the verdict sets (``calls``: its judge calls' rows, whose
    ids its votes name)."""
    return verdict_values(
        item.result,
        revision=revision,
        provisional=item.provisional,
        at=at,
        judge_digest=item.judge_digest,
        call_ids=[call["id"] for call in calls],
    )


def _call_rows(item: FinishedGrading, first_call: int, at: datetime) -> list[dict[str, Any]]:
    """The verdict's judge calls' rows, numbered on from ``first_call``."""
    return judge_call_rows(item.grading_id, item.result.calls, first_position=first_call, at=at)


def _bound(values: Mapping[str, Any]) -> dict[str, Any]:
    """Column values under their bind names (``b_`` + column: a bind may not share a
    column's name in an UPDATE)."""
    return {f"b_{name}": value for name, value in values.items()}


@cache
def _update_where_leased(columns: tuple[str, ...]) -> Update:
    """One verdict's UPDATE of ``columns`` where its lease holds, revision bumped in
    SQL, the row returned as written (built once: the columns are always the same)."""
    values: dict[str, Any] = {name: bindparam(f"b_{name}") for name in columns}
    return _LEASED_UPDATE.values({**values, "revision": _GRADINGS.c.revision + 1})


def _write_one(
    db: Database, session: Session, item: FinishedGrading, at: datetime
) -> StoredVerdicts:
    """A batch of one verdict: its UPDATE is the lease check (see the module)."""
    calls = _call_rows(item, 0, at)  # their ids first: the votes name them
    changed = _verdict_columns(item, at, 0, calls)
    del changed["revision"]
    statement = _update_where_leased(tuple(changed))
    params = {"b_id": item.grading_id, "b_worker": item.worker_id, **_bound(changed)}
    row = session.connection().execute(statement, params).mappings().first()
    if row is None:
        return StoredVerdicts(stored=[False])
    _check_rubric(row, item)
    if row["claim_count"] > 1:  # calls of earlier, deferred claims come first
        first_call = calls_before(session, [item.grading_id]).get(item.grading_id, 0)
        for call in calls:
            call["position"] += first_call
    batch = _Rows()
    batch.add(row, item, calls, at, written=changed)
    _write(db, session, batch)
    return StoredVerdicts(stored=[True], gradings=batch.gradings)


def write_verdicts(
    db: Database, session: Session, items: Sequence[FinishedGrading], at: datetime
) -> StoredVerdicts:
    """Store the verdicts whose leases hold, in the caller's transaction (see the module).

    Raises ``ValueError`` (the caller's transaction is then rolled back) when a verdict
    is for another rubric version than its grading.
    """
    if len(items) == 1:
        return _write_one(db, session, items[0], at)
    rows = leased_rows(db, session, items)
    accepted: list[tuple[FinishedGrading, Mapping[str, Any]]] = []
    outcome = StoredVerdicts()
    for item in items:
        row = rows.pop(item.grading_id, None)  # popped: a second verdict of it is refused
        holds = row is not None and _holds_lease(row, item)
        outcome.stored.append(holds)
        if row is not None and holds:
            _check_rubric(row, item)
            accepted.append((item, row))
    if not accepted:
        return outcome
    again = [item.grading_id for item, row in accepted if row["claim_count"] > 1]
    first_calls = calls_before(session, again)
    batch = _Rows()
    for item, row in accepted:
        calls = _call_rows(item, first_calls.get(item.grading_id, 0), at)
        batch.add(row, item, calls, at)
    _write(db, session, batch)
    outcome.gradings = batch.gradings
    return outcome


def _write(db: Database, session: Session, batch: _Rows) -> None:
    """One statement per table, then the audit rows (after the other writes); the
    gradings' UPDATE unless their rows were written already."""
    if batch.updates:
        columns = [key.removeprefix("b_") for key in batch.updates[0] if key != "b_id"]
        statement = (
            update(_GRADINGS)
            .where(_GRADINGS.c.id == bindparam("b_id"))
            .values({name: bindparam(f"b_{name}") for name in columns})
        )
        session.connection().execute(statement, batch.updates)
    insert_rows(session, _ANSWERS, batch.answers)
    insert_rows(session, _CALLS, batch.calls)
    insert_cache_rows(session, batch.cache)
    db.audit_many(session, batch.events, batch.covers, batch.records)
