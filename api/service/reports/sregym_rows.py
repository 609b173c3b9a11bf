"""One stored grading as a row of SREGym's per-attempt results CSV.

SREGym flattens its results dict into ``Stage.key`` columns and writes them with
``csv.DictWriter``, so ``Diagnosis.dimensions`` (a dict) and ``Diagnosis.checklist`` (a
list of dicts) appear as Python reprs, read back with ``ast.literal_eval``. We write
the same: ``{'D1': {'name': 'Fault localization', 'score': 1.0}, ...}`` and
``[{'id': 'D1-Q1', 'answer': 'Yes', 'evidence': '...', 'confidence': 'High'}, ...]``.
A grading with no verdict (unscored or pending) gets empty success, judgment, score
and dimensions and an empty checklist, as SREGym writes for a judge that gave none.
"""

from __future__ import annotations

from typing import Any

from judge.rubric import Rubric
from storage.effective import record_answers
from storage.exports import ExportedGrading

__all__ = ["SREGYM_COLUMNS", "confidence_label", "sregym_row"]

#: SREGym's columns (its Diagnosis.* sorted as it sorts them), then ours
SREGYM_COLUMNS = (
    "problem_id",
    "attempt",
    "Diagnosis.accuracy",
    "Diagnosis.checklist",
    "Diagnosis.composite_score",
    "Diagnosis.dimensions",
    "Diagnosis.judgment",
    "Diagnosis.reasoning",
    "Diagnosis.submission",
    "Diagnosis.success",
    "agent",
    "model",
    "run_id",
    "judge",
    "grading_id",
    "status",
)


def confidence_label(value: float | None) -> str | None:
    """SREGym's High / Medium / Low for a confidence in [0, 1] (parsed as 0.9 / 0.6 / 0.3)."""
    if value is None:
        return None
    if value >= 0.75:
        return "High"
    return "Medium" if value >= 0.45 else "Low"


def _dimensions(
    rubric: Rubric | None, answers: dict[str, bool], dimension_of: dict[str, str]
) -> dict[str, dict[str, Any]]:
    names = {d.id: d.name for d in rubric.dimensions} if rubric else {}
    yes: dict[str, list[int]] = {}
    for question, answer in answers.items():
        counts = yes.setdefault(dimension_of[question], [0, 0])
        counts[0] += int(answer)
        counts[1] += 1
    return {
        dim: {"name": names.get(dim, dim), "score": y / total} for dim, (y, total) in yes.items()
    }


def _reasoning(status: str, item: ExportedGrading, dimensions: dict[str, Any]) -> str:
    g = item.view.grading
    if status != "graded":
        reason = g.unscored_reason or g.pending_reason or status
        return f"{status}: {reason}" + (f" ({g.detail})" if g.detail else "")
    scores = ", ".join(f"{d} {v['score']:.2f}" for d, v in dimensions.items())
    verdict = "pass" if g.passed else "fail"
    overridden = " after human overrides" if g.overridden else ""
    return f"{g.yes_count} yes; {scores}; {verdict}{overridden}"


def sregym_row(item: ExportedGrading, rubric: Rubric | None) -> dict[str, Any]:
    """The SREGym CSV row of one grading (effective values)."""
    g, s = item.view.grading, item.view.submission
    answers = record_answers(item.view.answers, item.overrides)
    dimension_of = {a.question_id: a.dimension_id for a in item.view.answers}
    dimensions = _dimensions(rubric, answers, dimension_of)
    checklist = [
        {
            "id": a.question_id,
            "answer": "Yes" if answers[a.question_id] else "No",
            "evidence": a.evidence,
            "confidence": confidence_label(a.confidence),
        }
        for a in item.view.answers
    ]
    verdict = g.passed
    return {
        "problem_id": s.scenario_id or (s.metadata_ or {}).get("problem_id") or "",
        "attempt": s.attempt,
        "Diagnosis.accuracy": None if g.composite is None else round(g.composite * 100.0, 2),
        "Diagnosis.checklist": checklist,
        "Diagnosis.composite_score": g.composite,
        "Diagnosis.dimensions": dimensions or None,
        "Diagnosis.judgment": None if verdict is None else str(verdict),
        "Diagnosis.reasoning": _reasoning(g.status, item, dimensions),
        "Diagnosis.submission": s.diagnosis,
        "Diagnosis.success": verdict,
        "agent": s.agent,
        "model": s.model,
        "run_id": s.run_id,
        "judge": f"{g.judge_backend}:{g.judge_model}",
        "grading_id": g.id,
        "status": g.status,
    }
