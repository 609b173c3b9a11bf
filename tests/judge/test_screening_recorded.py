"""Screening gives the results recorded before its injection search was made cheaper.

``screening_expected.jsonl`` holds ``screen``'s result (redacted text, review reasons,
notes, injected spans) for every text ``bench/screening.py`` measures: the calibration
set's diagnoses, both injection regression sets and their benign texts, the bench's
diagnosis, and every case and benign text once more under each disguise of
``bench.screening.DISGUISES`` (mixed case, zero-width characters, look-alike letters,
markers split across lines, full-width letters, spaced letters, dotless i, leetspeak).
It was written by the screening before the prefilter (``python bench/screening.py
--record tests/judge/screening_expected.jsonl`` at that commit); a text that is not in
it fails the test rather than being skipped. A case added to a corpus since is recorded
by the same command, once its screening is checked by hand: the file then pins the
current screening instead. The injected spans of the texts flagged with none (an
instruction split over lines, which no line carries alone) were recorded again once
screening took the paragraph or text that carries it; nothing else in them changed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.screening import digest, screened, texts

RECORDED: dict[str, dict[str, Any]] = {
    row.pop("key"): row
    for row in map(
        json.loads,
        Path(__file__).with_name("screening_expected.jsonl").read_text("utf-8").splitlines(),
    )
}
CORPORA = texts()


def test_the_recording_covers_every_corpus_and_flags_the_injections() -> None:
    flagged = {row["corpus"] for row in RECORDED.values() if row["review_reasons"]}
    assert {"injection cases", "disguised cases", "disguised variants"} <= flagged
    assert len(RECORDED) >= 800


@pytest.mark.parametrize("name", list(CORPORA))
def test_every_text_screens_as_recorded(name: str) -> None:
    differ = []
    for text in CORPORA[name]:
        expected = RECORDED.get(digest(text))
        assert expected is not None, f"not recorded: {text[:80]!r}"
        expected = {key: value for key, value in expected.items() if key != "corpus"}
        if screened(text) != expected:
            differ.append((text[:80], screened(text), expected))
    assert not differ, differ[:3]
