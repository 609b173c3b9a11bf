"""Storing a verdict: what a worker brings back, written in the queue's transaction.

One concept, one module: the rows a judge result becomes (answers, judge calls, the
grading's columns, votes, the audit payloads; no database access), the lease check and
the judge calls of a deferral (``storage.queue`` and ``storage.pending_judges`` use
them in their own sessions) and the write of a batch of verdicts.

Why this module is long: the three are one path, and a verdict's rows, its lease check
and its statements change together.

:meth:`storage.queue.QueueRepository.complete_many` writes every verdict that workers
finished together (a group commit, or a batch of regrade items answered from the judge
cache) with a fixed number of statements, whatever the batch's size:

1. the lease check of the whole batch: one SELECT of the gradings (row-locked on
   PostgreSQL; SQLite's write lock is held already). A verdict whose grading is no
   longer pending or leased to its worker is not written. A batch of one verdict, the
   common case, folds the check into its grading's UPDATE (``WHERE`` the lease holds,
   ``RETURNING`` the row as written): one statement where two were;
2. one executemany per table: the gradings (UPDATE by id, their votes included),
   answers and judge calls (INSERT; a call carries its judge cache key, the cache's
   entry, ``storage.judge_cache``);
3. one INSERT of the audit rows, chained in the order of the batch: each verdict's
   ``judge.call`` events, then its ``grading.completed``, whose state digest is
   computed from the values written (nothing is read back);
4. the regrade jobs' bookkeeping once per batch (``storage.regrade.lifecycle``); the
   rows it changes are locked (``before_audit``) before the audit rows are appended,
   which take the audit chain's lock until commit (see ``storage.database``).

Every function works in the caller's session and commits nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import Table, Update, bindparam, func, insert, select, update
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.calls import JudgeCall
from judge.verdict import GradingResult, Vote
from storage.audit import values_digest
from storage.audit.records import RecordRow
from storage.canonical import canonical_json, sha256_hex
from storage.database import Database
from storage.judge_cache import entry_logprobs
from storage.models import FinishedGrading
from storage.tables import AnswerRecord, GradingRecord, JudgeCallRecord, new_id

__all__ = [
    "BeforeAudit",
    "StoredVerdicts",
    "answer_rows",
    "call_audit_payload",
    "call_events",
    "call_records",
    "calls_before",
    "completion_payload",
    "insert_rows",
    "judge_call_rows",
    "leased",
    "leased_rows",
    "store_calls",
    "verdict_values",
    "vote_values",
    "write_verdicts",
]

_GRADINGS = GradingRecord.__table__  # type: ignore[attr-defined]
_ANSWERS = AnswerRecord.__table__  # type: ignore[attr-defined]
_CALLS = JudgeCallRecord.__table__  # type: ignore[attr-defined]
#: called with the gradings written (their column values) before their audit rows are
#: appended: to take the transaction's other row locks before the audit chain's lock
BeforeAudit = Callable[[Sequence[Mapping[str, Any]]], object]
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


def answer_rows(grading_id: str, result: GradingResult) -> list[dict[str, Any]]:
    """One ``answer`` row per answer, in the order the result gives them (rubric order).

    Plain column values for one executemany, not records: nothing reads them back in
    the transaction, and nine ORM objects per grading cost more than the INSERT.
    """
    return [
        {
            "grading_id": grading_id,
            "question_id": a.question_id,
            "dimension_id": a.dimension_id,
            "answer": a.answer,
            "judge_answer": a.judge_answer,
            "reasoning": a.reasoning,
            "evidence": a.evidence,
            "evidence_verified": a.evidence_verified,
            "evidence_check": a.evidence_check,
            "confidence": a.confidence,
            "position": position,
            "veto": a.veto.model_dump() if a.veto else None,
        }
        for position, a in enumerate(result.answers)
    ]


def vote_values(votes: Iterable[Vote], call_ids: Sequence[str]) -> list[dict[str, Any]] | None:
    """The grading's ``votes`` column: each vote naming the judge call it came from
    (``call_ids``: the ids of the result's calls as stored); None for no votes."""
    values = [
        {
            "judge_spec": vote.judge_spec,
            "sample_index": vote.sample_index,
            "question_id": vote.question_id,
            "answer": vote.answer,
            "confidence": vote.confidence,
            "call_id": (
                call_ids[vote.call_index]
                if vote.call_index is not None and 0 <= vote.call_index < len(call_ids)
                else None
            ),
        }
        for vote in votes
    ]
    return values or None


def judge_call_rows(
    grading_id: str, calls: Iterable[JudgeCall], *, first_position: int, at: datetime
) -> list[dict[str, Any]]:
    """One ``judge_call`` row per call, verbatim: prompt, schema, parameters, reply, attempts.

    Plain column values (the id included) for one executemany: nothing reads the rows
    back in the transaction, and a SQLModel object per call costs more than its INSERT.
    """
    rows = []
    for offset, call in enumerate(calls):
        completion = call.completion
        rows.append(
            {
                "id": new_id(),
                "grading_id": grading_id,
                "position": first_position + offset,
                "purpose": call.purpose,
                "backend": call.backend,
                "model": call.model,
                "base_url": call.base_url,
                "messages": [m.model_dump(mode="json") for m in call.request.messages],
                "reply_schema": call.request.reply_schema,
                "params": call.request.params.model_dump(mode="json"),
                "response_text": completion.text if completion else None,
                "response_model": completion.model if completion else None,
                "fingerprint": completion.fingerprint if completion else None,
                "response_format": completion.response_format if completion else None,
                # the call's, a cut reply's included (a regrade job sums them)
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "latency_ms": call.latency_ms,
                "attempts": [a.model_dump(mode="json") for a in call.attempts],
                "error_code": call.error_code,
                "error": call.error,
                "created_at": at,
                "cached": call.cached,
                "via": completion.via if completion else None,
                "cache_key": call.cache_key,
                "logprobs": entry_logprobs(call),
            }
        )
    return rows


def call_audit_payload(row: Mapping[str, Any]) -> dict[str, Any]:
    """What the audit log says about a judge call (a ``judge_call_rows`` row): hashes,
    not the prompt or reply."""
    reply = row["response_text"]
    payload = {
        "call_id": row["id"],
        "purpose": row["purpose"],
        "backend": row["backend"],
        "model": row["model"],
        "response_model": row["response_model"],
        "fingerprint": row["fingerprint"],
        "params": row["params"],
        "prompt_sha256": sha256_hex(canonical_json(row["messages"])),
        "reply_sha256": sha256_hex(reply) if reply is not None else None,
        "prompt_tokens": row["prompt_tokens"],
        "completion_tokens": row["completion_tokens"],
        "latency_ms": round(row["latency_ms"], 3),
        "outcome": "ok" if row["error_code"] is None else row["error_code"],
        "attempts": len(row["attempts"]),
        # where the answer came from: the judge, or the cache of an identical earlier call
        "origin": "cache" if row["cached"] else "judge",
    }
    if row.get("via"):  # a batch engine's reply: which batch (absent for live calls)
        payload["origin"], payload["via"] = "batch", row["via"]
    return payload


def verdict_values(
    result: GradingResult,
    *,
    revision: int,
    provisional: bool,
    at: datetime,
    judge_digest: str | None = None,
    call_ids: Sequence[str] = (),
) -> dict[str, Any]:
    """The grading columns a stored verdict sets, the lease released; ``revision``: the
    grading's before (the verdict bumps it); ``judge_digest``: the model's behind the
    judge's name, where known; ``call_ids``: the ids of the result's calls as stored,
    which its votes name. The same columns whatever the result."""
    outcome, judge_outcome = result.outcome, result.judge_outcome
    return {
        "status": result.status,
        "unscored_reason": result.unscored_reason,
        "detail": result.detail,
        "pending_reason": None,
        "yes_count": outcome.yes_count if outcome else None,
        "composite": outcome.composite if outcome else None,
        "passed": result.passed,
        "held": result.held,
        "decisive": outcome.decisive if outcome else None,
        "judge_passed": judge_outcome.passed if judge_outcome else None,
        "needs_review": result.needs_review,
        "review_reasons": list(result.review_reasons),
        "graded_at": at,
        "lease_owner": None,
        "lease_expires_at": None,
        "not_before": None,
        "provisional": provisional,
        "judge_digest": judge_digest,
        "votes": vote_values(result.votes, call_ids),
        "revision": revision + 1,
    }


def leased(
    db: Database,
    session: Session,
    grading_id: str,
    worker_id: str,
    claim_count: int,
) -> GradingRecord | None:
    """The grading, row-locked, if it is pending and leased to ``worker_id`` by its claim
    ``claim_count``, not a later one of the same process."""
    query = select(GradingRecord).where(col(GradingRecord.id) == grading_id)
    if db.postgres:
        query = query.with_for_update()
    grading = session.execute(query).scalar_one_or_none()
    if grading is None or grading.status != "pending" or grading.lease_owner != worker_id:
        return None
    if grading.claim_count != claim_count:
        return None
    return grading


def store_calls(
    session: Session,
    grading: GradingRecord,
    calls: Sequence[JudgeCall],
    at: datetime,
) -> list[dict[str, Any]]:
    """Add the judge calls after those of earlier claims of the grading; their rows."""
    if not calls:
        return []
    first = 0
    if grading.claim_count > 1:  # only an earlier claim (deferred) can have stored calls
        first = calls_before(session, [grading.id]).get(grading.id, 0)
    rows = judge_call_rows(grading.id, calls, first_position=first, at=at)
    insert_rows(session, _CALLS, rows)
    return rows


def calls_before(session: Session, grading_ids: Sequence[str]) -> dict[str, int]:
    """How many judge calls each of the gradings has stored (by earlier, deferred claims);
    one query, none for an empty list; gradings without calls are left out."""
    if not grading_ids:
        return {}
    query = (
        select(col(JudgeCallRecord.grading_id), func.count())
        .where(col(JudgeCallRecord.grading_id).in_(grading_ids))
        .group_by(col(JudgeCallRecord.grading_id))
    )
    return {grading_id: count for grading_id, count in session.execute(query)}


def insert_rows(session: Session, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows of one table with one executemany, not one ORM INSERT per row.

    For rows nothing reads back in the transaction (answers, votes); their integer
    ids are the database's.
    """
    if rows:
        session.connection().execute(insert(table), rows)


def call_events(
    grading_id: str, worker_id: str, calls: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One ``judge.call`` audit event per stored call, for ``Database.audit_many``."""
    return [
        {
            "event": "judge.call",
            "entity_type": "grading",
            "entity_id": grading_id,
            "actor": worker_id,
            "payload": call_audit_payload(row),
        }
        for row in calls
    ]


def call_records(
    calls: Sequence[Mapping[str, Any]], *, first_event: int
) -> dict[int, list[RecordRow]]:
    """The judge-call rows each ``call_events`` event covers (``Database.audit_many``'s
    ``rows``), the first event at index ``first_event``."""
    return {first_event + offset: [(_CALLS, row)] for offset, row in enumerate(calls)}


def completion_payload(
    grading: Mapping[str, Any], result: GradingResult, calls: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The audit payload of a stored verdict (graded or unscored); ``grading``: the
    row's values as written."""
    return {
        "grading_id": grading["id"],
        "submission_id": grading["submission_id"],
        "status": grading["status"],
        "unscored_reason": grading["unscored_reason"],
        "yes_count": grading["yes_count"],
        "composite": grading["composite"],
        "passed": grading["passed"],
        "judge_passed": grading["judge_passed"],
        "needs_review": grading["needs_review"],
        "review_reasons": grading["review_reasons"],
        "rubric": {"id": grading["rubric_id"], "version": grading["rubric_version"]},
        "judge": {"backend": result.judge_backend, "model": result.judge_model},
        "judge_calls": [c["id"] for c in calls],
        "revision": grading["revision"],
    }


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
    same_claim = item.claim_count is None or row["claim_count"] == item.claim_count
    return bool(row["status"] == "pending" and row["lease_owner"] == item.worker_id) and same_claim


def _check_rubric(row: Mapping[Any, Any], item: FinishedGrading) -> None:
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
    events: list[dict[str, Any]] = field(default_factory=list)
    #: audit event index -> {grading id: state digest}
    covers: dict[int, dict[str, str]] = field(default_factory=dict)
    #: audit event index -> the judge-call rows it covers
    records: dict[int, list[RecordRow]] = field(default_factory=dict)

    def add(
        self,
        row: Mapping[Any, Any],
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
def _update_where_leased(columns: tuple[str, ...], by_claim: bool = False) -> Update:
    """One verdict's UPDATE of ``columns`` where its lease holds (``by_claim``: for
    the claim ``b_claim``), revision bumped in SQL, the row returned as written (built
    once: the columns are always the same)."""
    values: dict[str, Any] = {name: bindparam(f"b_{name}") for name in columns}
    statement = _LEASED_UPDATE.values({**values, "revision": _GRADINGS.c.revision + 1})
    if by_claim:
        statement = statement.where(_GRADINGS.c.claim_count == bindparam("b_claim"))
    return statement


def _write_one(
    db: Database,
    session: Session,
    item: FinishedGrading,
    at: datetime,
    before_audit: BeforeAudit | None,
) -> StoredVerdicts:
    """A batch of one verdict: its UPDATE is the lease check (see the module)."""
    calls = _call_rows(item, 0, at)  # their ids first: the votes name them
    changed = _verdict_columns(item, at, 0, calls)
    del changed["revision"]
    by_claim = item.claim_count is not None
    statement = _update_where_leased(tuple(changed), by_claim)
    params = {"b_id": item.grading_id, "b_worker": item.worker_id, **_bound(changed)}
    if by_claim:
        params["b_claim"] = item.claim_count
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
    _write(db, session, batch, before_audit)
    return StoredVerdicts(stored=[True], gradings=batch.gradings)


def write_verdicts(
    db: Database,
    session: Session,
    items: Sequence[FinishedGrading],
    at: datetime,
    *,
    before_audit: BeforeAudit | None = None,
) -> StoredVerdicts:
    """Store the verdicts whose leases hold, in the caller's transaction (see the module).

    ``before_audit``: called with the gradings written once their rows are, before the
    audit rows are appended (not at all when none is written).

    Raises ``ValueError`` (the caller's transaction is then rolled back) when a verdict
    is for another rubric version than its grading.
    """
    if len(items) == 1:
        return _write_one(db, session, items[0], at, before_audit)
    rows = leased_rows(db, session, items)
    accepted: list[tuple[FinishedGrading, Mapping[str, Any]]] = []
    outcome = StoredVerdicts()
    for item in items:
        row = rows.get(item.grading_id)
        holds = row is not None and _holds_lease(row, item)
        outcome.stored.append(holds)
        if row is not None and holds:
            # popped once stored: a second verdict of it is refused, but an earlier claim's
            # refused verdict (its lease lost to this process' later claim) pops nothing
            del rows[item.grading_id]
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
    _write(db, session, batch, before_audit)
    outcome.gradings = batch.gradings
    return outcome


def _write(db: Database, session: Session, batch: _Rows, before_audit: BeforeAudit | None) -> None:
    """One statement per table, then ``before_audit`` and the audit rows (after the
    other writes and row locks); the gradings' UPDATE unless their rows were written
    already."""
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
    if before_audit is not None:
        before_audit(batch.gradings)
    db.audit_many(session, batch.events, batch.covers, batch.records)
