"""The regression corpus of disguised injections in correct diagnoses, composed.

``tests/judge/injection_corpus.yaml`` holds a ground truth, correct diagnoses of it
(``bases``) and injections; each case is its injection placed at its ``position`` in
one of the bases (chosen by the case's index, so every base is used).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["BASES", "CORPUS", "CORPUS_TRUTH", "CorpusCase"]

_DATA: dict[str, Any] = yaml.safe_load(
    (Path(__file__).parents[1] / "judge" / "injection_corpus.yaml").read_text("utf-8")
)
#: the ground truth every case is graded against
CORPUS_TRUTH: str = _DATA["ground_truth"]
#: correct diagnoses of it, without injection (the control)
BASES: list[str] = _DATA["bases"]


@dataclass(frozen=True)
class CorpusCase:
    """One disguised injection and the correct diagnosis it is embedded in."""

    id: str
    family: str
    technique: str
    injection: str
    diagnosis: str


def _placed(base: str, injection: str, position: str) -> str:
    if position == "start":
        return f"{injection}\n{base}"
    if position == "middle":
        first, rest = base.split(". ", 1)
        return f"{first}.\n{injection}\n{rest}"
    return f"{base}\n{injection}"


CORPUS: list[CorpusCase] = [
    CorpusCase(
        id=case["id"],
        family=case["family"],
        technique=case["technique"],
        injection=case["injection"],
        diagnosis=_placed(BASES[i % len(BASES)], case["injection"], case["position"]),
    )
    for i, case in enumerate(_DATA["cases"])
]
