"""The pass rule, computed in code and never taken from the judge.

passed = yes_count >= min_yes and every dimension has at least min_yes_per_dimension
yes. The composite follows SREGym's weights so scores compare with SREGym's.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from judge.rubric import Rubric

__all__ = ["COMPOSITE_DIGITS", "DimensionScore", "RuleOutcome", "apply_rule"]

#: SREGym reports the composite rounded to two decimals
COMPOSITE_DIGITS = 2


class DimensionScore(BaseModel):
    """Yes answers of one dimension."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    yes: int
    total: int

    @property
    def failed(self) -> bool:
        """A dimension with no yes at all."""
        return self.yes == 0


class RuleOutcome(BaseModel):
    """What the rule says about a set of answers."""

    model_config = ConfigDict(frozen=True)

    yes_count: int
    total: int
    dimensions: tuple[DimensionScore, ...]
    composite: float
    passed: bool
    #: flipping any single answer would flip the verdict
    decisive: bool


def _passes(rubric: Rubric, answers: Mapping[str, bool]) -> bool:
    rule = rubric.rule
    yes_count = sum(1 for q in rubric.questions if answers[q.id])
    if yes_count < rule.min_yes:
        return False
    return all(
        sum(1 for q in d.questions if answers[q.id]) >= rule.min_yes_per_dimension
        for d in rubric.dimensions
    )


def apply_rule(rubric: Rubric, answers: Mapping[str, bool]) -> RuleOutcome:
    """Apply the rubric's rule to one yes/no answer per question."""
    missing = [q.id for q in rubric.questions if q.id not in answers]
    if missing:
        raise KeyError(f"no answer for {', '.join(missing)}")
    dimensions = tuple(
        DimensionScore(
            id=d.id,
            name=d.name,
            yes=sum(1 for q in d.questions if answers[q.id]),
            total=len(d.questions),
        )
        for d in rubric.dimensions
    )
    composite = sum(
        weight * score.yes / score.total
        for weight, score in zip(rubric.rule.weights, dimensions, strict=True)
    )
    passed = _passes(rubric, answers)
    decisive = any(
        _passes(rubric, {**answers, q.id: not answers[q.id]}) != passed for q in rubric.questions
    )
    return RuleOutcome(
        yes_count=sum(s.yes for s in dimensions),
        total=sum(s.total for s in dimensions),
        dimensions=dimensions,
        composite=round(composite + 1e-9, COMPOSITE_DIGITS),
        passed=passed,
        decisive=decisive,
    )
