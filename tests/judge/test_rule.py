"""The pass rule over every answer combination, against SREGym's composite rule."""

from __future__ import annotations

import itertools

import pytest

from judge.rubric import Rubric, load_rubric_dir
from judge.rule import apply_rule


@pytest.fixture(scope="module")
def default_rubric() -> Rubric:
    return load_rubric_dir()["sregym-rca"]


def _sregym_composite(answers: dict[str, bool]) -> float:
    dims = [sum(answers[f"D{d}-Q{q}"] for q in (1, 2, 3)) / 3 for d in (1, 2, 3)]
    return 0.33 * dims[0] + 0.33 * dims[1] + 0.34 * dims[2]


def test_all_512_combinations_follow_the_rule_and_match_sregym(default_rubric: Rubric) -> None:
    ids = [q.id for q in default_rubric.questions]
    for bits in itertools.product([False, True], repeat=9):
        answers = dict(zip(ids, bits, strict=True))
        outcome = apply_rule(default_rubric, answers)
        per_dim = [sum(bits[i : i + 3]) for i in (0, 3, 6)]
        expected = sum(bits) >= 7 and min(per_dim) >= 1
        assert outcome.passed is expected, answers
        assert outcome.passed is (_sregym_composite(answers) >= 0.70 - 1e-9), answers
        assert outcome.yes_count == sum(bits)
        assert [d.yes for d in outcome.dimensions] == per_dim
        assert outcome.composite == round(_sregym_composite(answers), 2)
        flips = [
            apply_rule(default_rubric, {**answers, q: not answers[q]}).passed != expected
            for q in ids
        ]
        assert outcome.decisive is any(flips)


def test_seven_yes_is_decisive_and_nine_is_not(default_rubric: Rubric) -> None:
    ids = [q.id for q in default_rubric.questions]
    seven = {q: i < 7 for i, q in enumerate(ids)}
    assert apply_rule(default_rubric, seven).passed
    assert apply_rule(default_rubric, seven).decisive
    nine = dict.fromkeys(ids, True)
    assert apply_rule(default_rubric, nine).decisive is False
    assert apply_rule(default_rubric, nine).composite == 1.0


def test_a_failed_dimension_fails_even_with_enough_yes() -> None:
    rubric = load_rubric_dir()["sregym-rca"].model_copy(
        update={"rule": load_rubric_dir()["sregym-rca"].rule.model_copy(update={"min_yes": 6})}
    )
    answers = {q.id: not q.id.startswith("D3") for q in rubric.questions}
    outcome = apply_rule(rubric, answers)
    assert outcome.yes_count == 6
    assert outcome.passed is False
    assert outcome.dimensions[2].failed


def test_missing_answers_are_refused(default_rubric: Rubric) -> None:
    with pytest.raises(KeyError, match="D3-Q3"):
        apply_rule(default_rubric, {q.id: True for q in default_rubric.questions[:-1]})
