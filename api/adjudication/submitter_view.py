"""What a submitter's page of a grading against a registered scenario shows: exactly
its API answer (``SRE_JUDGE_SUBMITTER_VIEW``), the verdict (with a link to the grading
that replaced it, when a promoted regrade did) and, under ``answers``, the effective
answer of each question beside the question's text."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.adjudication.grading_view import verdict_label
from api.service.schemas import SubmitterGradingAnswers, SubmitterGradingVerdict
from judge.rubric import Rubric

__all__ = ["SubmitterQuestion", "submitter_page_context"]


@dataclass(frozen=True, slots=True)
class SubmitterQuestion:
    """One rubric question with its effective answer."""

    id: str
    text: str
    dimension_name: str
    answer: str


def _questions(grading: SubmitterGradingVerdict, rubric: Rubric | None) -> list[SubmitterQuestion]:
    if not isinstance(grading, SubmitterGradingAnswers):
        return []
    texts = (
        {q.id: (q.text, d.name) for d in rubric.dimensions for q in d.questions} if rubric else {}
    )
    return [
        SubmitterQuestion(
            a.question_id, *texts.get(a.question_id, ("", a.dimension_id)), answer=a.answer
        )
        for a in grading.answers
    ]


def submitter_page_context(
    grading: SubmitterGradingVerdict, rubric: Rubric | None
) -> dict[str, Any]:
    """The template context of a submitter's grading page (without who is looking)."""
    return {
        "g": grading,
        "verdict": verdict_label(grading),
        "questions": _questions(grading, rubric),
    }
