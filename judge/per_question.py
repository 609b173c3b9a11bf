"""Per-question asking: the fenced texts first, then one short call per question.

Every call of one grading opens with the same system message and the same fenced
ground truth and diagnosis, byte for byte, and ends with its question, so servers that
cache prompt prefixes (llama.cpp, vLLM, Ollama) process the long part once. Each reply
is one small object ``{reasoning, evidence, answer, confidence}``, parsed strictly; a
bad one gets one repair call for that question, and a second bad one makes the grading
``unscored`` with reason ``unparseable_reply``. The judge cache keys on the whole
request, so it caches per question.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from judge.calls import ChatMessage, JudgeCall, JudgeRequest
from judge.confidence import with_logprob_confidence
from judge.context import Fit, estimate_tokens
from judge.prompt import build_answer_schema, build_question_messages
from judge.reply import ParsedAnswer, ReplyInvalid, parse_answer_reply
from judge.rubric import Rubric
from judge.verdict import GradingResult

if TYPE_CHECKING:
    from judge.grader import Grader

__all__ = ["ask_per_question", "question_repair_message"]


def question_repair_message(question_id: str, problems: list[str]) -> ChatMessage:
    """The follow-up that says what was wrong with the reply to one question."""
    return ChatMessage(
        role="user",
        content=(
            f"Your reply could not be used: {'; '.join(problems)}. Reply again with only "
            f"one JSON object answering {question_id}, with reasoning, evidence, "
            'answer ("yes" or "no") and confidence.'
        ),
    )


async def ask_per_question(
    grader: Grader, rubric: Rubric, ground_truth: str, fit: Fit
) -> GradingResult:
    """Ask every question of ``rubric`` in its own call; grade or make it unscored."""
    schema = build_answer_schema()
    calls: list[JudgeCall] = []
    parsed: dict[str, ParsedAnswer] = {}
    sources: dict[str, int] = {}
    for question in rubric.questions:
        qid = question.id
        messages = build_question_messages(rubric, ground_truth, fit.diagnosis, qid)
        request = JudgeRequest(messages=tuple(messages), reply_schema=schema, params=grader.params)
        call = await grader._call("grade", request)
        calls.append(call)
        if call.completion is None:
            return grader._unscored(rubric, calls, call.error_code or "judge_error", call.error)
        try:
            answer = parse_answer_reply(call.completion.text, qid)
        except ReplyInvalid as first:
            repair = [
                *messages,
                ChatMessage(role="assistant", content=call.completion.text),
                question_repair_message(qid, first.problems),
            ]
            window = await grader._context_window()
            if window is not None and estimate_tokens(repair) + grader.params.max_tokens > window:
                detail = f"{qid}: {first}; the repair call would not fit the context window"
                return grader._unscored(rubric, calls, "context_overflow", detail)
            request = JudgeRequest(
                messages=tuple(repair), reply_schema=schema, params=grader.params
            )
            call = await grader._call("repair", request)
            calls.append(call)
            if call.completion is None:
                return grader._unscored(rubric, calls, call.error_code or "judge_error", call.error)
            try:
                answer = parse_answer_reply(call.completion.text, qid)
            except ReplyInvalid as second:
                detail = f"{qid}: first reply: {first}; repaired reply: {second}"
                return grader._unscored(rubric, calls, "unparseable_reply", detail)
        await grader._remember(calls[-2:] if call.purpose == "repair" else calls[-1:])
        parsed.update(with_logprob_confidence({qid: answer}, call.completion, single_id=qid))
        sources[qid] = len(calls) - 1
    return grader._graded(
        rubric, parsed, calls, ground_truth=ground_truth, diagnosis=fit.diagnosis, sources=sources
    )
