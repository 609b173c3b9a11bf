"""The injection screen finds what it found when its literal prefilter was replaced.

``injection_markers_expected.json`` holds ``injection_markers`` (kind and excerpt of
each marker) and, for a flagged text, ``injected_spans``, for each of the 5,380 texts of
``tests.support.screening_texts`` (every corpus of diagnoses, their lines, disguises and
seeded random texts; 2,971 flagged). It was written by the screening as it was before
(the prefilter that read ``re``'s private parse trees), with ``python -m
tests.judge.test_injection_recorded``; a text that is not in it fails the test rather
than being skipped. The spans of the texts flagged with none (an instruction split over
lines, which no line carries alone) were recorded again once screening took the
paragraph or text that carries it; nothing else in them changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.screening import digest
from judge.injected_spans import injected_spans
from judge.injection import injection_markers
from tests.support.screening_texts import screening_texts

EXPECTED = Path(__file__).with_name("injection_markers_expected.json")


def screened(text: str) -> dict[str, Any] | None:
    """``text``'s markers and injected spans as one JSON value; None when it has none."""
    markers = injection_markers(text)
    if not markers:
        return None
    return {
        "markers": [[marker.kind, marker.excerpt] for marker in markers],
        "spans": [list(span) for span in injected_spans(text)],
    }


def _record() -> None:
    """Write every recorded text's screening to ``EXPECTED``."""
    unflagged: list[str] = []
    flagged: dict[str, Any] = {}
    for text in screening_texts():
        found = screened(text)
        if found is None:
            unflagged.append(digest(text))
        else:
            flagged[digest(text)] = found
    rows = [f"{json.dumps(key)}:{_compact(row)}" for key, row in flagged.items()]
    EXPECTED.write_text(
        f'{{"unflagged":{_compact(unflagged)},\n"flagged":{{\n' + ",\n".join(rows) + "}}\n", "utf-8"
    )


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@pytest.mark.slow  # a large data set: 5,380 texts screened, about 10 s
def test_every_text_screens_as_recorded() -> None:
    recorded = json.loads(EXPECTED.read_text("utf-8"))
    unflagged, flagged = set(recorded["unflagged"]), recorded["flagged"]
    differ, missing = [], []
    for text in screening_texts():
        key = digest(text)
        if key not in unflagged and key not in flagged:
            missing.append(text[:80])
        elif screened(text) != flagged.get(key):
            differ.append((text[:80], screened(text), flagged.get(key)))
    assert not missing, missing[:3]
    assert not differ, differ[:3]


def test_the_recording_is_large_and_flags_many_kinds() -> None:
    recorded = json.loads(EXPECTED.read_text("utf-8"))
    assert len(recorded["unflagged"]) >= 1500 and len(recorded["flagged"]) >= 1500
    kinds = {kind for row in recorded["flagged"].values() for kind, _ in row["markers"]}
    assert len(kinds) >= 14


if __name__ == "__main__":
    _record()
