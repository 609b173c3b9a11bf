"""Rubrics for tests that exercise a grounding condition the default rubric does not use."""

from __future__ import annotations

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
