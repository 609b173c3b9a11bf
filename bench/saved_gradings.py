"""The ``--save`` file of ``bench/judge_quality.py``: every grading of a run, one JSON
line each, so a stopped run resumes and figures can be recomputed on any subset."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Protocol

from judge.calibration import GoldItem
from judge.verdict import GradingResult

__all__ = ["case_key", "save_result", "saved_results"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


def case_key(item: GoldItem) -> str:
    """The case a gold item's grading is saved, resumed and looked up under: its ``id``,
    else ``sha256:<hex>`` of its ground truth and diagnosis (a gold file may leave ids
    out), so every item of such a file keeps a grading of its own."""
    if item.id is not None:
        return item.id
    graded = f"{item.ground_truth}\x00{item.diagnosis}".encode()
    return f"sha256:{hashlib.sha256(graded).hexdigest()}"


def saved_results(save: Path | None) -> dict[tuple[str, str], GradingResult]:
    """The gradings a ``--save`` file holds, by (combination, :func:`case_key`)."""
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
    record: dict[str, Any] = {"combo": combo.name, "case": case_key(item), "variant": item.variant}
    record["result"] = result.model_dump(mode="json")
    with save.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
