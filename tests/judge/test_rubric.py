"""Loading and validating rubric files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from judge.errors import RubricError
from judge.rubric import DEFAULT_RUBRIC_DIR, load_rubric, load_rubric_dir, split_rubric_ref


def _default_data() -> dict[str, Any]:
    return yaml.safe_load((DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text())


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
