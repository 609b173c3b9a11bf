"""Cases of the calibration set that ships with the package (labelled per LABELLING.md)."""

from __future__ import annotations

import json
from typing import Any

from judge.calibration import DEFAULT_GOLD


def calibration_case(case_id: str) -> dict[str, Any]:
    """One labelled case of the shipped calibration set, as its JSON line gives it."""
    for line in DEFAULT_GOLD.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["id"] == case_id:
            return dict(item)
    raise KeyError(case_id)
