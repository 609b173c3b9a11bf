"""Per-question asking: the fenced texts first, then one short call per question.

Every call of one grading opens with the same system message and the same fenced
ground truth and diagnosis, byte for byte, and ends with its question, so servers that
cache prompt prefixes (llama.cpp, vLLM, Ollama) process the long part once. Each reply
is one small object ``{reasoning, evidence, answer, confidence}``, parsed strictly; a
bad one gets one repair call for that question, and a second bad one makes the grading
``unscored`` with reason ``unparseable_reply``. The judge cache keys on the whole
request, so it caches per question.

A failed call ends the grading, except one recorded for a batch and not answered
(``judge.batch.NotAnswered``): no question's request depends on another's reply, so
every question is asked (and rendered) all the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from judge.asking import ask_with_repair
from judge.batch import NotAnswered
from judge.caller import JudgeCaller
from judge.calls import ChatMessage, JudgeCall
from judge.confidence import with_logprob_confidence
from judge.context import Fit
from judge.prompt import build_question_messages
from judge.reply import ParsedAnswer, parse_answer_reply
from judge.reply_format import answer_fields, build_answer_schema
from judge.results import graded_result, unscored_result
from judge.rubric import Question, Rubric
from judge.style import AskingStyle, style_of
from judge.verdict import GradingResult

__all__ = ["Collected", "ask_each", "ask_per_question", "question_repair_message"]


def question_repair_message(
    question_id: str, problems: list[str], *, reply_format: str = "full"
) -> ChatMessage:
    """The follow-up that says what was wrong with the reply to one question."""
    return ChatMessage(
        role="user",
        content=(
            f"Your reply could not be used: {'; '.join(problems)}. Reply again with only "
            f"one JSON object answering {question_id}, with {answer_fields(reply_format)}."
        ),
    )


#: what asking appends to: the calls made, the parsed answers, the call of each answer
Collected = tuple[list[JudgeCall], dict[str, ParsedAnswer], dict[str, int]]


async def ask_each(
    caller: JudgeCaller,
    rubric: Rubric,
    ground_truth: str,
    diagnosis: str,
    questions: Sequence[Question],
    style: AskingStyle,
    collected: Collected,
) -> tuple[str, str | None] | None:
    """Ask each of ``questions`` in its own call, appending to ``collected``; the
    ``(unscored_reason, detail)`` that ends the grading, or None when all were answered.

    A failed call ends the asking, but one not answered (rendered for a batch) does not:
    the other questions' requests are the grading's first calls too."""
    calls, parsed, sources = collected
    unanswered: tuple[str, str | None] | None = None
    form = style.reply_format
    asks = [
        (
            question,
            build_question_messages(rubric, ground_truth, diagnosis, question.id, style=style),
            build_answer_schema(form, question),
        )
        for question in questions
    ]
    # the cache entries of all the questions in one lookup, not one per question
    await caller.prefetch([caller.request(messages, schema) for _, messages, schema in asks])
    for question, messages, schema in asks:
        qid = question.id
        asked = await ask_with_repair(
            caller,
            messages,
            schema,
            parse=partial(
                parse_answer_reply,
                question_id=qid,
                reply_format=form,
                quote=question.requires_quote,
            ),
            repair_message=partial(question_repair_message, qid, reply_format=form),
            label=qid,
        )
        calls.extend(asked.calls)
        if asked.reason == NotAnswered.code:
            unanswered = unanswered or (asked.reason, asked.detail)
            continue
        if asked.parsed is None or asked.reason is not None:
            return asked.reason or "judge_error", asked.detail
        parsed.update(with_logprob_confidence({qid: asked.parsed}, asked.completion, single_id=qid))
        sources[qid] = len(calls) - 1
    return unanswered


async def ask_per_question(
    caller: JudgeCaller,
    rubric: Rubric,
    ground_truth: str,
    fit: Fit,
    *,
    injected: Sequence[tuple[int, int]] = (),
    style: AskingStyle | None = None,
) -> GradingResult:
    """Ask every question of ``rubric`` in its own call; grade or make it unscored.

    ``injected``: spans of the diagnosis screening marked as injected (not evidence);
    ``style``: the reply format and each question's polarity (default: the rubric's)."""
    style = style or style_of(rubric)
    calls: list[JudgeCall] = []
    parsed: dict[str, ParsedAnswer] = {}
    sources: dict[str, int] = {}
    ended = await ask_each(
        caller,
        rubric,
        ground_truth,
        fit.diagnosis,
        rubric.questions,
        style,
        (calls, parsed, sources),
    )
    if ended is not None:
        return unscored_result(rubric, caller.backend, calls, *ended)
    return graded_result(
        rubric,
        caller.backend,
        parsed,
        calls,
        ground_truth=ground_truth,
        diagnosis=fit.diagnosis,
        sources=sources,
        injected=injected,
        style=style,
    )
