"""Rubrics for tests: one exercising a grounding condition the default rubric does not
use, and a second rubric beside the shipped one."""

from __future__ import annotations

from pathlib import Path

import yaml

from judge.rubric import DEFAULT_RUBRIC_DIR, Rubric, rubric_from_mapping


def rubric_checking_values(question_id: str = "D2-Q3") -> Rubric:
    """The default rubric with ``grounding: consistent_values`` on one question.

    The default rubric leaves a wrong value of the right fault type to D2-Q2 (the
    labelling rules' D2-Q3 asks only for a rival fault type), so the value check is
    tested on a rubric that asks for it.
    """
    data = yaml.safe_load((DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text("utf-8"))
    questions = [q for d in data["dimensions"] for q in d["questions"]]
    next(q for q in questions if q["id"] == question_id)["grounding"] = "consistent_values"
    return rubric_from_mapping(data, source=f"sregym-rca, {question_id} checking values")


#: a second valid rubric, as a team writes its own: two dimensions of two questions, other
#: ids, another rule and weights, one question asked positively
OPS_MINI = """
id: ops-mini
label: v1
control_scenario: No fault was injected.
rule:
  min_yes: 3
  min_yes_per_dimension: 1
  weights: [0.5, 0.5]
dimensions:
  - id: where
    name: Where
    definition: Is the place right?
    questions:
      - id: where.1
        text: Does it name the component?
        requires_quote: true
        grounding: component
      - id: where.2
        text: Does it avoid blaming others?
        requires_quote: false
        positive_text: Does it blame others?
        ask_as: positive
  - id: what
    name: What
    definition: Is the mechanism right?
    questions:
      - id: what.1
        text: Does it state the mechanism?
        requires_quote: true
      - id: what.2
        text: Does it give the value?
        requires_quote: true
        grounding: values
"""


def rubric_dir_with_ops_mini(tmp_path: Path) -> Path:
    """A rubric folder (``SRE_JUDGE_RUBRIC_DIR``) with the shipped rubric and
    :data:`OPS_MINI`, a submitter may ask for by name."""
    folder = tmp_path / "rubrics"
    folder.mkdir(exist_ok=True)
    shipped = (DEFAULT_RUBRIC_DIR / "sregym-rca.yaml").read_text("utf-8")
    (folder / "sregym-rca.yaml").write_text(shipped, "utf-8")
    (folder / "ops-mini.yaml").write_text(OPS_MINI, "utf-8")
    return folder
