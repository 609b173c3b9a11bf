"""The grading objects a judge's replies become: graded, unscored, or an empty diagnosis.

Both asking strategies end here: the answers are checked (a quoted piece of evidence
must occur in the diagnosis, the ground truth's identifiers must be named, both outside
the spans screening marked as injected) and the
rubric's rule is applied to them, or the grading is ``unscored`` with its reason and
every call that was made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from judge.backends.base import JudgeBackend
from judge.calls import JudgeCall
from judge.consistency import reasoning_contradicts
from judge.evidence import QUOTE_PROBLEMS, DiagnosisText, QuoteCheck, without_spans
from judge.grounding import ground_answers
from judge.reply import ParsedAnswer
from judge.review_reasons import ReviewReason
from judge.rubric import Rubric
from judge.rule import apply_rule
from judge.spec import JudgeSpec
from judge.style import AskingStyle, in_rubric_polarity, style_of
from judge.verdict import Answer, GradingResult, Veto, Vote

__all__ = ["empty_diagnosis_result", "graded_result", "unscored_result"]


def _result(rubric: Rubric, backend: JudgeBackend, **fields: Any) -> GradingResult:
    return GradingResult(
        rubric_id=rubric.id,
        rubric_version=rubric.version,
        judge_backend=backend.name,
        judge_model=backend.model,
        **fields,
    )


def unscored_result(
    rubric: Rubric,
    backend: JudgeBackend,
    calls: Sequence[JudgeCall],
    reason: str,
    detail: str | None,
) -> GradingResult:
    """A grading the judge could not make, with the reason and every call made."""
    return _result(
        rubric,
        backend,
        status="unscored",
        unscored_reason=reason,
        detail=detail,
        review_reasons=(ReviewReason.UNSCORED,),
        calls=tuple(calls),
    )


def empty_diagnosis_result(rubric: Rubric, backend: JudgeBackend) -> GradingResult:
    """An empty diagnosis: no to every question, without asking the judge."""
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
    return _result(
        rubric,
        backend,
        status="graded",
        detail="empty_diagnosis",
        answers=answers,
        outcome=outcome,
        judge_outcome=outcome,
    )


def _quote_veto(rubric: Rubric, check: QuoteCheck) -> Veto:
    """The flag (``unverified_yes: review``) or veto (``downgrade``) of an unbacked yes."""
    effect = "vetoed" if rubric.unverified_yes == "downgrade" else "flagged"
    reason = f"{QUOTE_PROBLEMS[check]}: a yes to this question needs a quote from it"
    return Veto.model_validate({"check": f"evidence.{check}", "effect": effect, "reason": reason})


def _checked_answers(
    rubric: Rubric,
    parsed: Mapping[str, ParsedAnswer],
    diagnosis: str,
    injected: Sequence[tuple[int, int]],
) -> tuple[list[Answer], list[str]]:
    """The answers with their quotes checked, and the questions whose yes lacks its quote.

    Every quote given is checked, whatever the question and answer, once per distinct
    quote, against the diagnosis prepared once: one quote has one outcome wherever it is
    cited. Only a yes to a question that requires a quote is flagged or vetoed
    (``Answer.veto``) for lacking one.
    """
    answers: list[Answer] = []
    unverified: list[str] = []
    checks: dict[str, QuoteCheck] = {}
    text = DiagnosisText(diagnosis, injected)
    for q in rubric.questions:
        reply = parsed[q.id]
        needed = reply.answer and q.requires_quote
        check: QuoteCheck | None = None
        if reply.evidence.strip() or needed:
            if reply.evidence not in checks:
                checks[reply.evidence] = text.check(reply.evidence)
            check = checks[reply.evidence]
        effective, veto = reply.answer, None
        if needed and check is not None and check != "found":
            unverified.append(q.id)
            veto = _quote_veto(rubric, check)
            effective = veto.effect != "vetoed"
        answers.append(
            Answer(
                question_id=q.id,
                dimension_id=rubric.dimension_of(q.id).id,
                answer=effective,
                judge_answer=reply.answer,
                reasoning=reply.reasoning,
                evidence=reply.evidence,
                evidence_verified=None if check is None else check == "found",
                evidence_check=check,
                confidence=reply.confidence,
                veto=veto,
            )
        )
    return answers, unverified


def _contradicted(
    rubric: Rubric, parsed: Mapping[str, ParsedAnswer], style: AskingStyle
) -> list[str]:
    """The questions whose reasoning says the opposite of the answer, as asked."""
    return [
        q.id
        for q in rubric.questions
        if q.id in parsed
        and reasoning_contradicts(style.wording(q)[0], parsed[q.id].answer, parsed[q.id].reasoning)
    ]


def graded_result(
    rubric: Rubric,
    backend: JudgeBackend,
    parsed: Mapping[str, ParsedAnswer],
    calls: Sequence[JudgeCall],
    *,
    ground_truth: str,
    diagnosis: str,
    sources: Mapping[str, int] | None = None,
    injected: Sequence[tuple[int, int]] = (),
    style: AskingStyle | None = None,
) -> GradingResult:
    """Checks and rule; ``sources``: the call each answer came from (default the last);
    ``injected``: spans of ``diagnosis`` that neither evidence nor grounding may use;
    ``style``: how the questions were asked (``parsed`` is in that polarity)."""
    style = style or style_of(rubric)
    contradicted = _contradicted(rubric, parsed, style)
    parsed = in_rubric_polarity(parsed, rubric, style)
    answers, unverified = _checked_answers(rubric, parsed, diagnosis, injected)
    checked = without_spans(diagnosis, injected)
    answers, grounding = ground_answers(rubric, ground_truth, checked, answers)
    reasons: list[str] = [ReviewReason.EVIDENCE_UNVERIFIED] if unverified else []
    if grounding and rubric.grounding_failure == "flag":
        reasons.append(ReviewReason.GROUNDING_FAILED)
    notes = [f"evidence not found for {', '.join(unverified)}"] if unverified else []
    if contradicted:
        reasons.append(ReviewReason.REASONING_CONTRADICTS)
        notes.append(f"reasoning contradicts the answer for {', '.join(contradicted)}")
    return _result(
        rubric,
        backend,
        status="graded",
        answers=tuple(answers),
        outcome=apply_rule(rubric, {a.question_id: a.answer for a in answers}),
        judge_outcome=apply_rule(rubric, {a.question_id: a.judge_answer for a in answers}),
        review_reasons=tuple(reasons),
        detail="; ".join([*notes, *grounding]) or None,
        calls=tuple(calls),
        votes=_votes(backend, answers, sources or {}, last=len(calls) - 1),
    )


def _votes(
    backend: JudgeBackend, answers: list[Answer], sources: Mapping[str, int], *, last: int
) -> tuple[Vote, ...]:
    """This judge's vote per question: what it said, with the call it came from."""
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
