"""Loading and validating rubric files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from judge.backends.scripted import ScriptedBackend, scripted_reply
from judge.errors import RubricError
from judge.grader import Grader
from judge.rubric import DEFAULT_RUBRIC_DIR, load_rubric, load_rubric_dir, split_rubric_ref


def _default_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text())
    return data


def _write(tmp_path: Path, data: Any) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_default_rubric_has_nine_questions_in_three_dimensions() -> None:
    rubric = load_rubric_dir()["sregym-rca"]
    assert [d.id for d in rubric.dimensions] == ["D1", "D2", "D3"]
    assert [q.id for q in rubric.questions] == [f"D{d}-Q{q}" for d in (1, 2, 3) for q in (1, 2, 3)]
    assert rubric.rule.min_yes == 7
    assert rubric.rule.weights == (0.33, 0.33, 0.34)
    assert any(q.requires_quote for q in rubric.questions)
    assert any(not q.requires_quote for q in rubric.questions)


def test_version_is_label_plus_content_hash_and_ignores_formatting(tmp_path: Path) -> None:
    original = load_rubric(DEFAULT_RUBRIC_DIR / "sregym-rca.yaml")
    data = _default_data()
    reordered = _write(tmp_path, dict(reversed(list(data.items()))))
    assert load_rubric(reordered).version == original.version
    assert original.version.startswith("v1+")
    data["dimensions"][1]["questions"][0]["text"] += " Reworded."
    assert load_rubric(_write(tmp_path, data)).version != original.version


def _mutated(mutate: Any) -> dict[str, Any]:
    data = _default_data()
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["dimensions"][0]["questions"].append(
                dict(d["dimensions"][0]["questions"][0])
            ),
            "duplicate question id",
        ),
        (lambda d: d["dimensions"].append(dict(d["dimensions"][0])), "duplicate dimension id"),
        (lambda d: d["dimensions"][2].update(questions=[]), "at least one question"),
        (lambda d: d.update(colour="blue"), "colour: unknown key"),
        (lambda d: d["dimensions"][0]["questions"][0].update(weight=2), "unknown key"),
        (lambda d: d["rule"].update(min_yes=10), "can never pass"),
        (lambda d: d["rule"].update(min_yes_per_dimension=4), "can never pass"),
        (lambda d: d["rule"].update(min_yes=0, min_yes_per_dimension=0), "always passes"),
        (lambda d: d["rule"].update(weights=[0.5, 0.5]), "2 weights for 3 dimensions"),
        (lambda d: d["rule"].update(weights=[0.5, 0.5, 0.5]), "sum to 1"),
        # a little under 1 is taken for thirds written 0.33, nothing over: nine yes would
        # make a composite above 1
        (lambda d: d["rule"].update(weights=[0.34, 0.33, 0.34]), "sum to 1"),
        # YAML reads yes/no as booleans: never a count of one or a weight of 1
        (lambda d: d["rule"].update(min_yes=True), "rule.min_yes"),
        (lambda d: d["rule"].update(min_yes_per_dimension=True), "rule.min_yes_per_dimension"),
        (lambda d: d["rule"].update(weights=[True, False, False]), "rule.weights"),
        # every comparison with NaN is false: a NaN weight made every composite NaN
        (lambda d: d["rule"].update(weights=[float("nan"), 0.5, 0.5]), "non-negative"),
        (lambda d: d["rule"].update(weights=[float("inf"), 0.5, 0.5]), "non-negative"),
        (lambda d: d["dimensions"][0]["questions"][0].pop("requires_quote"), "requires_quote"),
        (lambda d: d.update(unverified_yes="ignore"), "unverified_yes"),
    ],
)
def test_bad_rubrics_are_rejected_naming_file_and_fault(
    tmp_path: Path, mutate: Any, message: str
) -> None:
    path = _write(tmp_path, _mutated(mutate))
    with pytest.raises(RubricError) as info:
        load_rubric(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


def test_unreadable_and_invalid_yaml_are_rubric_errors(tmp_path: Path) -> None:
    with pytest.raises(RubricError, match="cannot read"):
        load_rubric(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: [unclosed")
    with pytest.raises(RubricError, match="not valid YAML"):
        load_rubric(bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(RubricError, match="must be a mapping"):
        load_rubric(listing)


def test_duplicate_rubric_ids_in_a_folder_are_rejected(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(_default_data()))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump(_default_data()))
    with pytest.raises(RubricError, match="defined twice"):
        load_rubric_dir(tmp_path)


def test_a_rubric_reference_is_an_id_or_an_id_at_a_version_never_an_empty_version() -> None:
    """``id`` names the current version and ``id@version`` that version; ``id@`` names
    none, so it is refused rather than read as the current version."""
    assert split_rubric_ref("sregym-rca") == ("sregym-rca", None)
    assert split_rubric_ref("sregym-rca@v1+abc") == ("sregym-rca", "v1+abc")
    with pytest.raises(ValueError, match="empty"):
        split_rubric_ref("sregym-rca@")


def test_the_default_d1q2_hint_counts_an_affected_component_as_co_origin() -> None:
    """D1-Q2's hint reads as the labelling rules do: an affected component presented as an
    origin or as a co-origin is a no, as D1-Q1's and D1-Q3's hints beside it say."""
    hint = load_rubric_dir()["sregym-rca"].question("D1-Q2").hint
    assert "presented as origin or co-origin" in " ".join(hint.split())


def test_the_default_d2q3_asks_only_for_a_rival_fault_type() -> None:
    """D2-Q3 is a no only where another fault type is asserted as (part of) the cause: in
    both its wordings a wrong value is not named as a reason, and no value check in code
    vetoes its yes."""
    question = load_rubric_dir()["sregym-rca"].question("D2-Q3")
    assert question.grounding is None
    for hint in (question.hint, question.positive_hint):
        assert "another fault type is part of the cause" in hint
        assert "value" not in hint, hint


async def test_a_wrong_value_of_the_right_fault_type_costs_d2q2_and_not_d2q3() -> None:
    """A diagnosis of the right fault type with a wrong value (a CPU limit of 500m where
    the ground truth sets 200m), graded by a judge that says yes to everything, loses
    D2-Q2 to its value check and keeps D2-Q3's yes."""
    truth = (
        "[fault_spec] component=deployment/compose-post-service; namespace=social-network || "
        "The CPU limit of the compose-post-service container was lowered from 2 cores to "
        "200m; compose requests take 3 to 5 s. Affected: nginx-thrift (504 after 3 s)."
    )
    diagnosis = (
        "compose-post-service's CPU limit was lowered to 500m, so the container is CPU "
        "throttled and compose requests are slow; nginx-thrift times out with 504."
    )
    grader = Grader(ScriptedBackend([scripted_reply]))  # yes to all, quoting the diagnosis
    result = await grader.grade(load_rubric_dir()["sregym-rca"], truth, diagnosis)
    answers = {a.question_id: a for a in result.answers}
    assert answers["D2-Q2"].judge_answer and not answers["D2-Q2"].answer
    assert answers["D2-Q3"].answer is True and answers["D2-Q3"].veto is None
