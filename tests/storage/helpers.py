"""Building judge results and submissions for storage tests, with the real judge types."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from functools import cache
from typing import Any

from api.adjudication.override_queries import OverrideQueries
from judge.calls import Attempt, ChatMessage, Completion, JudgeCall, JudgeRequest, SamplingParams
from judge.rubric import Rubric, load_rubric_dir
from judge.rule import apply_rule
from judge.verdict import Answer, GradingResult
from storage import GradingRecord, NewSubmission, OverrideRecord, Store, SubmissionOutcome

JUDGE_SPEC = "openai:judge-model@http://127.0.0.1:8080/v1"


@cache
def sregym_rubric() -> Rubric:
    """The default rubric of this checkout."""
    return load_rubric_dir()["sregym-rca"]


def new_submission(
    diagnosis: str = "the checkout deployment ran out of memory", **kw: object
) -> NewSubmission:
    """An inline-ground-truth submission; keywords override fields."""
    fields: dict[str, object] = {
        "diagnosis": diagnosis,
        "ground_truth": "[fault_spec] component=deployment/checkout; namespace=shop || OOM",
        "ground_truth_source": "inline",
        "agent": "agent-a",
        "model": "model-x",
        "run_id": "run-1",
        "attempt": 1,
        "metadata": {"harness": "tests"},
    }
    fields.update(kw)
    return NewSubmission.model_validate(fields)


async def submit(
    store: Store,
    data: NewSubmission | None = None,
    *,
    actor: str = "tok-1",
    idempotency_key: str | None = None,
) -> SubmissionOutcome:
    """Store a submission graded by the default rubric and a fake judge."""
    return await store.submissions.create(
        data or new_submission(),
        rubric=sregym_rubric(),
        judge_spec=JUDGE_SPEC,
        judge_backend="openai",
        judge_model="judge-model",
        actor=actor,
        idempotency_key=idempotency_key,
    )


def judge_call(*, ok: bool = True, purpose: str = "grade") -> JudgeCall:
    """A judge call with one attempt, answered or failed."""
    request = JudgeRequest(
        messages=(
            ChatMessage(role="system", content="You grade diagnoses."),
            ChatMessage(role="user", content="<diagnosis>the checkout pod OOMs</diagnosis>"),
        ),
        reply_schema={"type": "object"},
        params=SamplingParams(temperature=0.0, seed=7, max_tokens=512),
    )
    attempt = Attempt(
        number=1,
        started_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        latency_ms=12.5,
        outcome="ok" if ok else "judge_unavailable",
        status_code=200 if ok else None,
        error=None if ok else "connection refused",
    )
    if not ok:
        return JudgeCall(
            purpose=purpose,  # type: ignore[arg-type]
            backend="openai",
            model="judge-model",
            base_url="http://127.0.0.1:8080/v1",
            request=request,
            error_code="judge_unavailable",
            error="connection refused",
            attempts=(attempt,),
        )
    completion = Completion(
        text='{"answers": []}',
        model="judge-model-2025",
        fingerprint="fp_1",
        prompt_tokens=900,
        completion_tokens=300,
        response_format="json_schema",
    )
    return JudgeCall(
        purpose=purpose,  # type: ignore[arg-type]
        backend="openai",
        model="judge-model",
        base_url="http://127.0.0.1:8080/v1",
        request=request,
        completion=completion,
        attempts=(attempt,),
    )


def graded_result(yes: Iterable[str] | None = None, *, calls: int = 1) -> GradingResult:
    """A graded result; ``yes`` names the questions answered yes (default: all)."""
    rubric = sregym_rubric()
    ids = [q.id for q in rubric.questions]
    yes_ids = set(ids if yes is None else yes)
    answers = tuple(
        Answer(
            question_id=q,
            dimension_id=rubric.dimension_of(q).id,
            answer=q in yes_ids,
            judge_answer=q in yes_ids,
            reasoning=f"reasoning for {q}",
            evidence="checkout" if q in yes_ids else "",
            evidence_verified=True if q in yes_ids else None,
            confidence=0.9,
        )
        for q in ids
    )
    outcome = apply_rule(rubric, {a.question_id: a.answer for a in answers})
    return GradingResult(
        status="graded",
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        judge_backend="openai",
        judge_model="judge-model",
        answers=answers,
        outcome=outcome,
        judge_outcome=outcome,
        calls=tuple(judge_call() for _ in range(calls)),
    )


def unscored_result() -> GradingResult:
    """An unscored result: the judge's reply could not be parsed."""
    rubric = sregym_rubric()
    return GradingResult(
        status="unscored",
        unscored_reason="unparseable_reply",
        detail="first reply: not JSON",
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        judge_backend="openai",
        judge_model="judge-model",
        review_reasons=("unscored",),
        calls=(judge_call(), judge_call(purpose="repair")),
    )


async def override(
    store: Store, grading_id: str, **values: Any
) -> tuple[OverrideRecord, GradingRecord]:
    """Append an override in a write transaction of its own, as the adjudication use case
    does in its (``values``: ``OverrideQueries.add_in``'s keywords)."""
    return await store.db.run(OverrideQueries(store.db).add_in, grading_id, **values)
