"""Grading one submission: prompt, judge call, strict parse, evidence check, rule.

A judge that could not answer yields an ``unscored`` result with a reason and every
call kept; it is never turned into nine "No" nor into a pass.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Literal

from judge.backends.base import ContextWindowAware, JudgeBackend
from judge.cache import JudgeCache, cache_key
from judge.calls import ChatMessage, JudgeCall, JudgeRequest, SamplingParams
from judge.confidence import with_logprob_confidence
from judge.context import Fit, OverflowPolicy, estimate_tokens, fit_diagnosis
from judge.errors import InputError, JudgeCallError
from judge.evidence import quote_occurs
from judge.grounding import ground_answers
from judge.prompt import build_messages, build_repair_message, build_reply_schema
from judge.reply import ParsedAnswer, ReplyInvalid, parse_reply
from judge.retry import RetryPolicy, complete_with_retries
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric
from judge.rule import apply_rule
from judge.screening import screen
from judge.spec import JudgeSpec
from judge.verdict import Answer, GradingResult, Vote

__all__ = ["DEFAULT_MAX_TEXT_BYTES", "Grader", "check_text"]

DEFAULT_MAX_TEXT_BYTES = 64 * 1024


def check_text(text: str, *, field: str, max_bytes: int = DEFAULT_MAX_TEXT_BYTES) -> None:
    """Reject text that cannot be graded as given: NUL bytes or over the size limit."""
    if "\x00" in text:
        raise InputError(f"{field} contains NUL bytes", field=field)
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size > max_bytes:
        raise InputError(f"{field} is {size} bytes, over the limit of {max_bytes}", field=field)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"{field} is not valid UTF-8 text", field=field) from None


@dataclass
class Grader:
    """Applies rubrics with one judge backend."""

    backend: JudgeBackend
    params: SamplingParams = field(default_factory=SamplingParams)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_text_bytes: int = DEFAULT_MAX_TEXT_BYTES
    #: reuse completions of identical requests at temperature 0 (see ``judge.cache``)
    cache: JudgeCache | None = None
    #: the judge's context window in tokens; None: ``params.num_ctx``, else what the
    #: backend reports (``ContextWindowAware``), else no check (see ``judge.context``)
    context_tokens: int | None = None
    #: a prompt that would not fit: ``unscored`` (context_overflow) or ``truncate``
    context_overflow: OverflowPolicy = "unscored"
    #: ``single`` or ``per_question`` (``judge.per_question``); None: the rubric's
    asking: Literal["single", "per_question"] | None = None

    async def grade(self, rubric: Rubric, ground_truth: str, diagnosis: str) -> GradingResult:
        """Grade ``diagnosis`` against ``ground_truth``; raises InputError on bad input.

        The diagnosis is screened first (credentials redacted, injection markers flagged:
        ``judge.screening``) and must fit the judge's context window with the reply.
        """
        check_text(ground_truth, field="ground_truth", max_bytes=self.max_text_bytes)
        check_text(diagnosis, field="diagnosis", max_bytes=self.max_text_bytes)
        if not diagnosis.strip():
            return self._empty_diagnosis(rubric)
        screening = await asyncio.to_thread(screen, diagnosis)  # regex work off the loop
        fit = fit_diagnosis(
            lambda text: build_messages(rubric, ground_truth, text),
            screening.text,
            window=await self._context_window(),
            max_tokens=self.params.max_tokens,
            policy=self.context_overflow,
        )
        if fit.overflow is not None:
            result = self._unscored(rubric, [], "context_overflow", fit.overflow)
        else:
            result = await self._ask(rubric, ground_truth, fit)
        return screening.apply(result, fit.cut)

    async def _context_window(self) -> int | None:
        if self.context_tokens is not None:
            return self.context_tokens
        if self.params.num_ctx is not None:
            return self.params.num_ctx
        if isinstance(self.backend, ContextWindowAware):
            return await self.backend.context_window()
        return None

    async def _ask(self, rubric: Rubric, ground_truth: str, fit: Fit) -> GradingResult:
        """The judge call, one repair call if needed, and the checks of the answers."""
        if (self.asking or rubric.asking) == "per_question":
            from judge.per_question import ask_per_question  # it builds on this module

            return await ask_per_question(self, rubric, ground_truth, fit)
        messages, diagnosis = fit.messages, fit.diagnosis
        schema = build_reply_schema(rubric)
        calls: list[JudgeCall] = []
        call = await self._call(
            "grade", JudgeRequest(messages=tuple(messages), reply_schema=schema, params=self.params)
        )
        calls.append(call)
        if call.completion is None:
            return self._unscored(rubric, calls, call.error_code or "judge_error", call.error)
        try:
            parsed = parse_reply(call.completion.text, rubric)
            await self._remember(calls)
        except ReplyInvalid as first:
            repair = [
                *messages,
                ChatMessage(role="assistant", content=call.completion.text),
                build_repair_message(rubric, first.problems),
            ]
            window = await self._context_window()
            if window is not None and estimate_tokens(repair) + self.params.max_tokens > window:
                detail = f"first reply: {first}; the repair call would not fit the context window"
                return self._unscored(rubric, calls, "context_overflow", detail)
            request = JudgeRequest(messages=tuple(repair), reply_schema=schema, params=self.params)
            call = await self._call("repair", request)
            calls.append(call)
            if call.completion is None:
                return self._unscored(rubric, calls, call.error_code or "judge_error", call.error)
            try:
                parsed = parse_reply(call.completion.text, rubric)
                await self._remember(calls)
            except ReplyInvalid as second:
                detail = f"first reply: {first}; repaired reply: {second}"
                return self._unscored(rubric, calls, "unparseable_reply", detail)
        parsed = with_logprob_confidence(parsed, call.completion)
        return self._graded(rubric, parsed, calls, ground_truth=ground_truth, diagnosis=diagnosis)

    def _cache_key(self, request: JudgeRequest) -> str | None:
        backend = self.backend
        return cache_key(
            request, backend=backend.name, model=backend.model, base_url=backend.base_url
        )

    async def _remember(self, calls: list[JudgeCall]) -> None:
        """Cache the completions of a conversation whose final reply was usable."""
        if self.cache is None:
            return
        for call in calls:
            key = self._cache_key(call.request)
            if key is not None and call.completion is not None and not call.cached:
                await self.cache.put(key, call.completion)

    async def _call(self, purpose: Literal["grade", "repair"], request: JudgeRequest) -> JudgeCall:
        backend = self.backend
        key = self._cache_key(request) if self.cache is not None else None
        if self.cache is not None and key is not None:
            hit = await self.cache.get(key)
            if hit is not None:
                return JudgeCall(
                    purpose=purpose,
                    backend=backend.name,
                    model=backend.model,
                    base_url=backend.base_url,
                    request=request,
                    completion=hit,
                    cached=True,
                )
        try:
            completion, attempts = await complete_with_retries(backend, request, policy=self.retry)
        except JudgeCallError as exc:
            return JudgeCall(
                purpose=purpose,
                backend=backend.name,
                model=backend.model,
                base_url=backend.base_url,
                request=request,
                error_code=exc.code,
                error=str(exc)[:1000],
                attempts=tuple(exc.attempts),
            )
        return JudgeCall(
            purpose=purpose,
            backend=backend.name,
            model=backend.model,
            base_url=backend.base_url,
            request=request,
            completion=completion,
            attempts=tuple(attempts),
        )

    def _result(self, rubric: Rubric, **fields: Any) -> GradingResult:
        return GradingResult(
            rubric_id=rubric.id,
            rubric_version=rubric.version,
            judge_backend=self.backend.name,
            judge_model=self.backend.model,
            **fields,
        )

    def _unscored(
        self, rubric: Rubric, calls: list[JudgeCall], reason: str, detail: str | None
    ) -> GradingResult:
        return self._result(
            rubric,
            status="unscored",
            unscored_reason=reason,
            detail=detail,
            review_reasons=(ReviewReason.UNSCORED,),
            calls=tuple(calls),
        )

    def _empty_diagnosis(self, rubric: Rubric) -> GradingResult:
        answers = tuple(
            Answer(
                question_id=q.id,
                dimension_id=rubric.dimension_of(q.id).id,
                answer=False,
                judge_answer=False,
                reasoning="the diagnosis is empty",
            )
            for q in rubric.questions
        )
        outcome = apply_rule(rubric, {q.id: False for q in rubric.questions})
        return self._result(
            rubric,
            status="graded",
            detail="empty_diagnosis",
            answers=answers,
            outcome=outcome,
            judge_outcome=outcome,
        )

    def _graded(
        self,
        rubric: Rubric,
        parsed: dict[str, ParsedAnswer],
        calls: list[JudgeCall],
        *,
        ground_truth: str,
        diagnosis: str,
        sources: dict[str, int] | None = None,
    ) -> GradingResult:
        """Checks and rule; ``sources``: the call each answer came from (default the last)."""
        answers: list[Answer] = []
        unverified: list[str] = []
        for q in rubric.questions:
            reply = parsed[q.id]
            verified: bool | None = None
            effective = reply.answer
            if reply.answer and q.requires_quote:
                verified = quote_occurs(reply.evidence, diagnosis)
                if not verified:
                    unverified.append(q.id)
                    effective = rubric.unverified_yes != "downgrade"
            answers.append(
                Answer(
                    question_id=q.id,
                    dimension_id=rubric.dimension_of(q.id).id,
                    answer=effective,
                    judge_answer=reply.answer,
                    reasoning=reply.reasoning,
                    evidence=reply.evidence,
                    evidence_verified=verified,
                    confidence=reply.confidence,
                )
            )
        answers, grounding = ground_answers(rubric, ground_truth, diagnosis, answers)
        reasons: list[str] = [ReviewReason.EVIDENCE_UNVERIFIED] if unverified else []
        if grounding and rubric.grounding_failure == "flag":
            reasons.append(ReviewReason.GROUNDING_FAILED)
        notes = [f"evidence not found for {', '.join(unverified)}"] if unverified else []
        return self._result(
            rubric,
            status="graded",
            answers=tuple(answers),
            outcome=apply_rule(rubric, {a.question_id: a.answer for a in answers}),
            judge_outcome=apply_rule(rubric, {a.question_id: a.judge_answer for a in answers}),
            review_reasons=tuple(reasons),
            detail="; ".join([*notes, *grounding]) or None,
            calls=tuple(calls),
            votes=self._votes(answers, sources or {}, last=len(calls) - 1),
        )

    def _votes(
        self, answers: list[Answer], sources: dict[str, int], *, last: int
    ) -> tuple[Vote, ...]:
        """This judge's vote per question: what it said, with the call it came from."""
        backend = self.backend
        spec = str(JudgeSpec(backend.name, backend.model, backend.base_url))
        return tuple(
            Vote(
                judge_spec=spec,
                question_id=a.question_id,
                answer=a.judge_answer,
                confidence=a.confidence,
                call_index=sources.get(a.question_id, last),
            )
            for a in answers
        )
