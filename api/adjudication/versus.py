"""Two gradings of one attempt side by side, question by question: which answers differ,
each dimension's yes count, and the verdicts (the page ``/gradings/{a}/versus/{b}``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.adjudication.grading_view import verdict_label
from api.adjudication.use_cases import GradingPair
from api.service.schemas import AnswerPublic, GradingPublic
from judge.rubric import Rubric

__all__ = ["QuestionRow", "question_rows", "versus_context"]


@dataclass(frozen=True)
class QuestionRow:
    """One question as each grading answered it (None where a grading has no answer)."""

    question_id: str
    text: str
    dimension: str
    first: AnswerPublic | None
    second: AnswerPublic | None

    @property
    def differs(self) -> bool:
        """The effective answers differ, or only one grading answered."""
        if self.first is None or self.second is None:
            return self.first is not self.second
        return self.first.answer != self.second.answer


def _texts(rubrics: list[Rubric | None]) -> dict[str, tuple[str, str]]:
    """Question id -> (text, dimension name), the first rubric's wording first."""
    texts: dict[str, tuple[str, str]] = {}
    for rubric in rubrics:
        for dimension in rubric.dimensions if rubric else ():
            for question in dimension.questions:
                texts.setdefault(question.id, (question.text, dimension.name))
    return texts


def question_rows(
    first: GradingPublic,
    second: GradingPublic,
    rubrics: list[Rubric | None],
) -> list[QuestionRow]:
    """Every question either grading answered or either rubric asks, in the first
    rubric's order (then the second's, then any other answer's)."""
    texts = _texts(rubrics)
    answers = [{a.question_id: a for a in g.answers} for g in (first, second)]
    order = list(dict.fromkeys([*texts, *answers[0], *answers[1]]))
    return [
        QuestionRow(
            question_id=qid,
            text=texts.get(qid, (qid, ""))[0],
            dimension=texts.get(qid, ("", ""))[1],
            first=answers[0].get(qid),
            second=answers[1].get(qid),
        )
        for qid in order
    ]


def versus_context(pair: GradingPair) -> dict[str, Any]:
    """The template context of the side-by-side page (without who is looking)."""
    first, second = pair.first, pair.second
    assert isinstance(first, GradingPublic) and isinstance(second, GradingPublic)
    rows = question_rows(first, second, [pair.first_rubric, pair.second_rubric])
    dimensions = list(
        dict.fromkeys([d.id for d in first.dimensions] + [d.id for d in second.dimensions])
    )
    by_id = [{d.id: d for d in g.dimensions} for g in (first, second)]
    return {
        "a": first,
        "b": second,
        "verdicts": (verdict_label(first), verdict_label(second)),
        "rows": rows,
        "differing": sum(row.differs for row in rows),
        "dimensions": [(d, by_id[0].get(d), by_id[1].get(d)) for d in dimensions],
    }
