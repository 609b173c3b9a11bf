"""The ``--save`` file of ``bench/judge_quality.py``: every grading of a run, one JSON
line each, so a stopped run resumes and figures can be recomputed on any subset."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Protocol

from judge.calibration import GoldItem
from judge.verdict import GradingResult

__all__ = ["save_result", "saved_results"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def saved_results(save: Path | None) -> dict[tuple[str, str], GradingResult]:
    """The gradings a ``--save`` file holds, by (combination, case id)."""
    if save is None or not save.exists():
        return {}
    found = {}
    for line in save.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        found[(record["combo"], record["case"])] = GradingResult.model_validate(record["result"])
    return found


def save_result(save: Path | None, combo: _Named, item: GoldItem, result: GradingResult) -> None:
    """Append one grading (its answers, verdict and calls) to ``save`` as a JSON line."""
    if save is None:
        return
    record = {"combo": combo.name, "case": item.id, "variant": item.variant}
    record["result"] = result.model_dump(mode="json")
    with save.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
