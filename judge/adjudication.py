"""Human overrides applied to a grading: which are in force, and the effective verdict.

Overrides form an append-only history. Each targets one question's answer or the
verdict; a later override on the same target supersedes the earlier one, and a
``withdraw`` removes the override it names (the judge's value applies again). The rule
is recomputed on the effective answers; a verdict override wins over the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from judge.rubric import Rubric
from judge.rule import RuleOutcome, apply_rule

__all__ = [
    "EffectiveOutcome",
    "OverrideEvent",
    "Target",
    "answer_overrides",
    "effective_answers",
    "effective_outcome",
    "overrides_in_force",
    "target_of",
]

#: ("answer", question_id) or ("verdict", "")
Target = tuple[str, str]


@dataclass(frozen=True, slots=True)
class OverrideEvent:
    """One override as stored, in the order it was made."""

    id: str
    kind: Literal["answer", "verdict", "withdraw"]
    question_id: str | None = None
    answer: bool | None = None
    verdict: Literal["pass", "fail"] | None = None
    withdraws: str | None = None


def target_of(event: OverrideEvent) -> Target:
    """What an answer or verdict override corrects."""
    if event.kind == "answer":
        return ("answer", event.question_id or "")
    return ("verdict", "")


def overrides_in_force(events: Iterable[OverrideEvent]) -> dict[Target, OverrideEvent]:
    """The overrides still in force after the whole history, by target."""
    in_force: dict[Target, OverrideEvent] = {}
    for event in events:
        if event.kind == "withdraw":
            for target, current in list(in_force.items()):
                if current.id == event.withdraws:
                    del in_force[target]
        else:
            in_force[target_of(event)] = event
    return in_force


def answer_overrides(
    base_answers: Mapping[str, bool], in_force: Mapping[Target, OverrideEvent]
) -> dict[str, bool]:
    """The human answers in force on questions the grading has an answer to."""
    return {
        question_id: event.answer
        for (kind, question_id), event in in_force.items()
        if kind == "answer" and question_id in base_answers and event.answer is not None
    }


def effective_answers(
    base_answers: Mapping[str, bool], in_force: Mapping[Target, OverrideEvent]
) -> dict[str, bool]:
    """Question id -> effective answer: the stored answer unless an override is in force."""
    return {**base_answers, **answer_overrides(base_answers, in_force)}


@dataclass(frozen=True, slots=True)
class EffectiveOutcome:
    """Answers and verdict after human overrides."""

    answers: dict[str, bool]
    overridden_questions: frozenset[str]
    verdict_override: Literal["pass", "fail"] | None
    rule: RuleOutcome
    passed: bool

    @property
    def overridden(self) -> bool:
        """Whether any human override is in force."""
        return bool(self.overridden_questions) or self.verdict_override is not None


def effective_outcome(
    rubric: Rubric,
    base_answers: Mapping[str, bool],
    in_force: Mapping[Target, OverrideEvent],
) -> EffectiveOutcome:
    """Apply the overrides in force to the answers of a grading and recompute the rule."""
    overridden = answer_overrides(base_answers, in_force)
    answers = {**base_answers, **overridden}
    verdict_event = in_force.get(("verdict", ""))
    verdict = verdict_event.verdict if verdict_event else None
    rule = apply_rule(rubric, answers) if answers else None
    if rule is None:
        raise ValueError("a grading without answers has no rule outcome")
    passed = rule.passed if verdict is None else verdict == "pass"
    return EffectiveOutcome(
        answers=answers,
        overridden_questions=frozenset(overridden),
        verdict_override=verdict,
        rule=rule,
        passed=passed,
    )
