"""How a grading asks its questions: the reply format and each question's polarity.

A rubric says both (``reply_format``; per question ``ask_as`` with its
``positive_text``), and a judge setting may override either for every question
(``SRE_JUDGE_JUDGE_REPLY_FORMAT``, ``SRE_JUDGE_JUDGE_ASK_AS``). A question asked
positively ("does it name a different component as the origin?" for "does it avoid
naming a different component...?") gets its answer inverted in code: what is recorded,
audited and adjudicated is always in the rubric's own polarity, while the stored prompt
and raw reply show what was asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from judge.reply import ParsedAnswer
from judge.rubric import Question, Rubric

__all__ = ["AskAs", "AskingStyle", "ReplyFormat", "in_rubric_polarity", "style_of"]

ReplyFormat = Literal["full", "compact"]
AskAs = Literal["as_written", "positive"]


@dataclass(frozen=True, slots=True)
class AskingStyle:
    """The reply format of a grading and the questions asked in their positive wording."""

    reply_format: ReplyFormat = "full"
    #: ids of the questions asked as their ``positive_text`` (answers inverted in code)
    positive: frozenset[str] = frozenset()

    def wording(self, question: Question) -> tuple[str, str]:
        """The text and hint the judge is asked for ``question``."""
        if question.id in self.positive:
            return question.positive_text, question.positive_hint
        return question.text, question.hint


def style_of(
    rubric: Rubric, *, reply_format: ReplyFormat | None = None, ask_as: AskAs | None = None
) -> AskingStyle:
    """The rubric's style, with a judge setting's ``reply_format`` or ``ask_as`` over it.

    ``ask_as="positive"`` asks every question that has a ``positive_text`` positively;
    ``"as_written"`` none; None follows each question's own ``ask_as``.
    """
    if ask_as is None:
        positive = {q.id for q in rubric.questions if q.ask_as == "positive"}
    elif ask_as == "positive":
        positive = {q.id for q in rubric.questions if q.positive_text}
    else:
        positive = set()
    return AskingStyle(reply_format or rubric.reply_format, frozenset(positive))


def _yes_no(value: bool) -> str:
    return "yes" if value else "no"


def in_rubric_polarity(
    parsed: Mapping[str, ParsedAnswer], rubric: Rubric, style: AskingStyle
) -> dict[str, ParsedAnswer]:
    """The judge's answers in the rubric's polarity: positively asked ones inverted.

    The reasoning of an inverted answer opens with what was asked and answered, so a
    reader of the recorded answer sees why the judge's words seem to say the opposite.
    """
    result: dict[str, ParsedAnswer] = {}
    for qid, answer in parsed.items():
        if qid in style.positive:
            asked = rubric.question(qid).positive_text
            note = f"[asked: {asked} -> {_yes_no(answer.answer)}]"
            reasoning = f"{note} {answer.reasoning}".strip()
            answer = replace(answer, answer=not answer.answer, reasoning=reasoning)
        result[qid] = answer
    return result
