"""What one grading's page shows, built from the grading object the API also returns
(so a submitter's page withholds exactly what its API answer withholds)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from api.adjudication.highlight import Mark, Segment, evidence_passages, segments
from api.adjudication.trace_view import trace_view
from api.service.schemas import AnswerPublic, GradingPublic, GradingRead, OverridePublic
from judge.grounding import facts_of
from judge.review_reasons import hold_explanation
from judge.rubric import Rubric

__all__ = [
    "Changes",
    "GroundTruthView",
    "QuestionRow",
    "QuoteState",
    "TagChange",
    "changed_since",
    "grading_page_context",
    "quote_state",
    "verdict_label",
]


@dataclass(frozen=True, slots=True)
class QuoteState:
    """How a question card shows its quote: ``verified`` (found, backs the answer),
    ``overruled`` (found, but a check in code vetoed or flagged the yes), ``unverified``
    (not found, or no quote where a yes needs one) or ``quoted`` (not checked), with a
    sentence saying which and why."""

    kind: str
    note: str


@dataclass(frozen=True, slots=True)
class QuestionRow:
    """One rubric question beside its answer."""

    id: str
    text: str
    hint: str
    dimension_id: str
    dimension_name: str
    answer: AnswerPublic | None
    #: how the card shows the answer's quote; None where there is nothing to show
    quote: QuoteState | None = None


@dataclass
class GroundTruthView:
    """The ground truth as shown: the header's fields parsed out of the text."""

    text: str
    components: tuple[str, ...] = ()
    namespace: str | None = None
    values: tuple[str, ...] = field(default_factory=tuple)
    #: the scenario's version of this text (None for a self-supplied ground truth)
    version: int | None = None


def verdict_label(grading: GradingRead) -> str:
    """The effective verdict: PASS, FAIL, HELD (a flagged pass waiting for a human),
    UNSCORED or PENDING (CANCELLED for an item of a cancelled regrade job). A verdict
    override decides an unscored grading too, so a verdict in force reads as one whatever
    the judge's status; one with no verdict reads UNSCORED unless it is pending or
    cancelled, a graded one too (stored by earlier imports: never "GRADED", a status
    that says nothing of a verdict)."""
    if grading.held:
        return "HELD"
    if grading.passed is not None:
        return "PASS" if grading.passed else "FAIL"
    return grading.status.upper() if grading.status in ("pending", "cancelled") else "UNSCORED"


def quote_state(answer: AnswerPublic, *, requires_quote: bool | None) -> QuoteState | None:
    """How one answer's quote reads on its card: the same quote reads the same on every
    card citing it (one check per quote); where the answer differs, the card says why."""
    veto = answer.veto
    unneeded = " (this question asks for no quote)" if requires_quote is False else ""
    if answer.evidence_verified is False:
        reason = answer.evidence_reason or "the quote does not occur in the diagnosis"
        return QuoteState("unverified", f"NOT verified: {reason}{unneeded}")
    if not answer.evidence:
        return None
    if answer.evidence_verified is None:
        if requires_quote is False:
            return QuoteState("quoted", "not checked: this question asks for no quote")
        return QuoteState("quoted", "not checked")
    if veto is not None:
        what = "vetoed the yes" if veto.effect == "vetoed" else "flagged the yes"
        return QuoteState("overruled", f"found in the diagnosis, but {veto.check} {what}")
    return QuoteState("verified", f"found in the diagnosis{unneeded}")


def _questions(grading: GradingPublic, rubric: Rubric | None) -> list[QuestionRow]:
    answers = {a.question_id: a for a in grading.answers}
    if rubric is None:
        return [
            QuestionRow(
                a.question_id,
                a.question_id,
                "",
                a.dimension_id,
                a.dimension_id,
                a,
                quote_state(a, requires_quote=None),
            )
            for a in grading.answers
        ]
    rows = []
    for d in rubric.dimensions:
        for q in d.questions:
            answer = answers.get(q.id)
            quote = (  # a submitter's view of an answer has no quote
                quote_state(answer, requires_quote=q.requires_quote)
                if isinstance(answer, AnswerPublic)
                else None
            )
            rows.append(QuestionRow(q.id, q.text, q.hint, d.id, d.name, answer, quote))
    return rows


#: how a quote is marked: checked and found, checked and not found, or not checked (the
#: question asks for no quote, so a missing one is no reason for review)
_EVIDENCE_KIND = {True: "verified", False: "unverified", None: "quoted"}


def _marks(grading: GradingPublic, truth: GroundTruthView | None) -> list[Mark]:
    marks = []
    for a in grading.answers:
        kind = _EVIDENCE_KIND[a.evidence_verified]
        label = f"{a.question_id} ({a.veto.check} {a.veto.effect})" if a.veto else a.question_id
        for passage in evidence_passages(a.evidence):
            marks.append(Mark(passage, kind, label))
    if truth is not None:
        for value in (*truth.components, *truth.values):
            marks.append(Mark(value, "grounding", "ground truth"))
    return marks


def _ground_truth(grading: GradingPublic, graded: str | None) -> GroundTruthView | None:
    """The ground truth shown: ``graded`` (the text of the scenario version the grading
    is judged against) or, without it, the submission's."""
    text = graded if graded is not None else grading.submission.ground_truth
    if text is None:
        return None
    version = grading.scenario_version
    facts = facts_of(text)
    if facts is None:
        return GroundTruthView(text=text, version=version)
    return GroundTruthView(text, facts.components, facts.namespace, facts.values, version)


def _rule(grading: GradingPublic, rubric: Rubric | None) -> dict[str, Any] | None:
    """The rubric's rule, for the page to preview what a flip would do; None where the rule
    cannot be applied to the grading's answers (none, an unscored grading; some, an
    imported checklist that left questions out): no preview counts a missing answer as
    a no, and no answer can be flipped (a verdict override decides it)."""
    answered = {a.question_id for a in grading.answers}
    if rubric is None or any(q.id not in answered for q in rubric.questions):
        return None
    return {
        "min_yes": rubric.rule.min_yes,
        "min_yes_per_dimension": rubric.rule.min_yes_per_dimension,
    }


def grading_page_context(
    grading: GradingPublic, rubric: Rubric | None, ground_truth: str | None = None
) -> dict[str, Any]:
    """The template context of one grading's page (without who is looking);
    ``ground_truth``: the text the grading is judged against, when it is not the
    submission's (a regrade against a newer version of the scenario)."""
    truth = _ground_truth(grading, ground_truth)
    diagnosis: list[Segment] = segments(grading.submission.diagnosis, _marks(grading, truth))
    return {
        "g": grading,
        "verdict": verdict_label(grading),
        # a submitter's view carries no review reasons: its hold is explained generically
        "hold_reason": hold_explanation(getattr(grading, "review_reasons", None) or []),
        "truth": truth,
        "diagnosis": diagnosis,
        "trace": trace_view(grading),
        "questions": _questions(grading, rubric),
        "rule": _rule(grading, rubric),
        "overrides_by_id": {o.id: o for o in grading.overrides},
    }


#: the audit events of a failure tag added to or removed from a grading, and what they say
_TAG_EVENTS = {"grading.tagged": "added", "grading.untagged": "removed"}


@dataclass(frozen=True, slots=True)
class TagChange:
    """A failure tag someone added to the grading or removed from it."""

    tag: str
    #: ``added`` or ``removed``
    change: str
    #: who, by name
    by: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class Changes:
    """What someone changed on a grading since a page showed it: the overrides they
    added and the failure tags they added or removed. Neither: the grading itself changed
    (its judge's result came in, a regrade superseded it), which its history shows."""

    overrides: list[OverridePublic]
    tags: list[TagChange]


def changed_since(
    grading: GradingPublic, history: list[dict[str, Any]], *, revision: int, seen: set[str]
) -> Changes:
    """What changed since a page showed the grading at ``revision`` with the overrides
    ``seen``: the overrides not among them, and the failure tags added or removed after
    that revision, from the grading's audit ``history`` (as ``history_in`` gives it: each
    tag event names the revision it moved the grading to)."""
    tags = []
    for event in history:
        change, payload = _TAG_EVENTS.get(event["event"]), event["payload"]
        moved_to = payload.get("revision")
        if change is None or not isinstance(moved_to, int) or moved_to <= revision:
            continue
        note = payload.get("note") if change == "added" else ""
        tag = TagChange(str(payload.get("tag")), change, event["actor_name"], str(note or ""))
        tags.append(tag)
    return Changes([o for o in grading.overrides if o.id not in seen], tags)
