"""Turning judge results into rows and audit payloads (no database access here)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from judge.calls import JudgeCall
from judge.verdict import GradingResult, Vote
from storage.canonical import canonical_json, sha256_hex
from storage.tables import GradingRecord, JudgeCallRecord, new_id

__all__ = [
    "answer_rows",
    "apply_result",
    "call_audit_payload",
    "judge_call_records",
    "vote_rows",
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
            "confidence": a.confidence,
            "position": position,
        }
        for position, a in enumerate(result.answers)
    ]


def vote_rows(
    grading_id: str, votes: Iterable[Vote], call_ids: list[str], *, at: datetime
) -> list[dict[str, Any]]:
    """One ``judge_vote`` row per vote, pointing at the stored judge call it came from."""
    return [
        {
            "grading_id": grading_id,
            "judge_spec": v.judge_spec,
            "sample_index": v.sample_index,
            "question_id": v.question_id,
            "answer": v.answer,
            "confidence": v.confidence,
            "call_id": (
                call_ids[v.call_index]
                if v.call_index is not None and 0 <= v.call_index < len(call_ids)
                else None
            ),
            "created_at": at,
        }
        for v in votes
    ]


def judge_call_records(
    grading_id: str, calls: Iterable[JudgeCall], *, first_position: int, at: datetime
) -> list[JudgeCallRecord]:
    """One row per judge call, verbatim: prompt, schema, parameters, reply, attempts."""
    records = []
    for offset, call in enumerate(calls):
        completion = call.completion
        records.append(
            JudgeCallRecord(
                id=new_id(),
                grading_id=grading_id,
                position=first_position + offset,
                purpose=call.purpose,
                backend=call.backend,
                model=call.model,
                base_url=call.base_url,
                messages=[m.model_dump(mode="json") for m in call.request.messages],
                reply_schema=call.request.reply_schema,
                params=call.request.params.model_dump(mode="json"),
                response_text=completion.text if completion else None,
                response_model=completion.model if completion else None,
                fingerprint=completion.fingerprint if completion else None,
                response_format=completion.response_format if completion else None,
                prompt_tokens=completion.prompt_tokens if completion else None,
                completion_tokens=completion.completion_tokens if completion else None,
                latency_ms=call.latency_ms,
                attempts=[a.model_dump(mode="json") for a in call.attempts],
                error_code=call.error_code,
                error=call.error,
                created_at=at,
                cached=call.cached,
            )
        )
    return records


def call_audit_payload(record: JudgeCallRecord) -> dict[str, Any]:
    """What the audit log says about a judge call: hashes, not the prompt or reply."""
    return {
        "call_id": record.id,
        "purpose": record.purpose,
        "backend": record.backend,
        "model": record.model,
        "response_model": record.response_model,
        "fingerprint": record.fingerprint,
        "params": record.params,
        "prompt_sha256": sha256_hex(canonical_json(record.messages)),
        "reply_sha256": (
            sha256_hex(record.response_text) if record.response_text is not None else None
        ),
        "prompt_tokens": record.prompt_tokens,
        "completion_tokens": record.completion_tokens,
        "latency_ms": round(record.latency_ms, 3),
        "outcome": "ok" if record.error_code is None else record.error_code,
        "attempts": len(record.attempts),
        # where the answer came from: the judge, or the cache of an identical earlier call
        "origin": "cache" if record.cached else "judge",
    }


def apply_result(grading: GradingRecord, result: GradingResult, *, at: datetime) -> None:
    """Write a result's verdict into a grading row and release its lease."""
    outcome, judge_outcome = result.outcome, result.judge_outcome
    grading.status = result.status
    grading.unscored_reason = result.unscored_reason
    grading.detail = result.detail
    grading.pending_reason = None
    grading.yes_count = outcome.yes_count if outcome else None
    grading.composite = outcome.composite if outcome else None
    grading.passed = result.passed
    grading.held = result.held
    grading.decisive = outcome.decisive if outcome else None
    grading.judge_passed = judge_outcome.passed if judge_outcome else None
    grading.needs_review = result.needs_review
    grading.review_reasons = list(result.review_reasons)
    grading.graded_at = at
    grading.lease_owner = None
    grading.lease_expires_at = None
    grading.not_before = None
    grading.revision += 1
