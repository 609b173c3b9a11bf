"""One stored grading as a row of SREGym's per-attempt results CSV.

SREGym flattens its results dict into ``Stage.key`` columns and writes them with
``csv.DictWriter``, so ``Diagnosis.dimensions`` (a dict) and ``Diagnosis.checklist`` (a
list of dicts) appear as Python reprs, read back with ``ast.literal_eval``. We write
the same: ``{'D1': {'name': 'Fault localization', 'score': 1.0}, ...}`` and
``[{'id': 'D1-Q1', 'answer': 'Yes', 'evidence': '...', 'confidence': 'High'}, ...]``.
A grading with no verdict (unscored or pending) gets empty success, judgment, score
and dimensions and an empty checklist, as SREGym writes for a judge that gave none (a
graded one without a verdict, stored by earlier versions, empty success and judgment
and ``no verdict`` in ``Diagnosis.reasoning``, never a fail);
an unscored one a human's verdict override decided gets that verdict, and its
``Diagnosis.reasoning`` says a human decided it.
A held pass (injection markers, no human verdict yet) is written as not passed, with
the hold in ``Diagnosis.reasoning``.

``problem_id`` is the registered scenario's id; a ground truth the submitter sent is
written ``inline:<the problem id its metadata claims>``, never a registered id (those
cannot start with ``inline:``), so a self-supplied ground truth cannot pose as a scenario.
"""

from __future__ import annotations

from typing import Any

from api.reports.effective import record_answers
from api.reports.export_reads import ExportedGrading
from judge.masking import mask_passwords
from judge.review_reasons import hold_explanation
from judge.rubric import Rubric
from storage.tables import SubmissionRecord

__all__ = ["HELD_REASONING", "SREGYM_COLUMNS", "confidence_label", "problem_id", "sregym_row"]

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
    "ground_truth_source",
    "scenario_version",
)


#: the problem id prefix of a ground truth its submitter sent (no scenario id has it)
INLINE_PREFIX = "inline:"
#: what the reasoning column says of a held pass
HELD_REASONING = "held for review"


def problem_id(submission: SubmissionRecord) -> str:
    """The scenario id, or ``inline:`` and the id a self-supplied ground truth claims."""
    if submission.ground_truth_source == "scenario" and submission.scenario_id:
        return submission.scenario_id
    claimed = (submission.metadata_ or {}).get("problem_id")
    if not isinstance(claimed, str) or not claimed:
        sregym = (submission.metadata_ or {}).get("sregym")
        claimed = sregym.get("problem_id") if isinstance(sregym, dict) else None
    return f"{INLINE_PREFIX}{claimed}" if isinstance(claimed, str) and claimed else ""


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
    # rounded as SREGym's judge writes them (``round(yes / total, 2)``): the column reads
    # the same whichever judge filled it
    return {
        dim: {"name": names.get(dim, dim), "score": round(y / total, 2)}
        for dim, (y, total) in yes.items()
    }


def _reasoning(status: str, item: ExportedGrading, dimensions: dict[str, Any]) -> str:
    g = item.view.grading
    if status != "graded":
        reason = g.unscored_reason or g.pending_reason or status
        said = f"{status}: {reason}" + (f" ({mask_passwords(g.detail)})" if g.detail else "")
        if g.overridden and g.passed is not None:  # no rule to apply: a human's verdict
            said += f"; {'pass' if g.passed else 'fail'} by human verdict override"
        return said
    scores = ", ".join(f"{d} {v['score']:.2f}" for d, v in dimensions.items())
    if g.held:
        why = hold_explanation(g.review_reasons or [])
        return f"{g.yes_count} yes; {scores}; {HELD_REASONING}: {why}; not passed"
    if g.passed is None:  # graded without a verdict: the row's success is empty too
        return f"{g.yes_count} yes; {scores}; no verdict"
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
    verdict = False if g.held else g.passed
    return {
        "problem_id": problem_id(s),
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
        "judge": mask_passwords(f"{g.judge_backend}:{g.judge_model}"),
        "grading_id": g.id,
        "status": g.status,
        "ground_truth_source": s.ground_truth_source,
        "scenario_version": g.scenario_version,
    }
