"""Turning judge results into rows and audit payloads (no database access here)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from judge.calls import JudgeCall
from judge.verdict import GradingResult, Vote
from storage.canonical import canonical_json, sha256_hex
from storage.tables import new_id

__all__ = [
    "answer_rows",
    "call_audit_payload",
    "judge_call_rows",
    "verdict_values",
    "vote_values",
]


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
                "prompt_tokens": completion.prompt_tokens if completion else None,
                "completion_tokens": completion.completion_tokens if completion else None,
                "latency_ms": call.latency_ms,
                "attempts": [a.model_dump(mode="json") for a in call.attempts],
                "error_code": call.error_code,
                "error": call.error,
                "created_at": at,
                "cached": call.cached,
                "via": completion.via if completion else None,
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
