"""The replies a batch engine got for a regrade item, from which a worker answers it.

A regrade job graded through a batch engine (the Batch API, or an offline requests
file) keeps each judge request's reply under the request's hash; when the job's items
are released to the workers, the grader answers from these instead of asking the judge
(``api.regrade.batch_queries`` writes them).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session
from sqlmodel import col

from judge.calls import Completion
from storage.regrade.batch_tables import RegradeBatchRequestRecord

__all__ = ["batch_answers"]

_REQ = RegradeBatchRequestRecord


def batch_answers(session: Session, grading_id: str) -> dict[str, list[Completion]] | None:
    """The kept replies of a grading's batch requests by request hash, in sample order;
    None when the grading has no batch request (a live item)."""
    query = (
        select(col(_REQ.prompt_hash), col(_REQ.status), col(_REQ.completion))
        .where(col(_REQ.grading_id) == grading_id)
        .order_by(col(_REQ.call), col(_REQ.sample))
    )
    rows = session.execute(query).all()
    if not rows:
        return None
    answers: dict[str, list[Completion]] = {}
    for prompt_hash, status, completion in rows:
        if status == "answered" and completion is not None:
            answers.setdefault(prompt_hash, []).append(Completion.model_validate(completion))
    return answers
