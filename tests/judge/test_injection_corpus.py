"""The corpus of disguised injections in correct diagnoses: screening flags every case.

Screening is a signal, not the gate (``tests/api/http/test_injection_corpus.py`` checks
that no case ends ``passed: true`` through the service, flagged or not); this checks the
signal itself: every disguise carries markers, its decoded kinds say which encoding, and
the ordinary texts beside them carry none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from judge.injection import injection_markers
from tests.support.injection_corpus import BASES, CORPUS, CorpusCase

BENIGN: list[str] = yaml.safe_load(
    Path(__file__).with_name("injection_corpus.yaml").read_text("utf-8")
)["benign"]
#: the disguises an adversarial pass found unflagged: the corpus starts with them
FOUND_UNFLAGGED = [
    "code-comment-note-grader",
    "ignore-split-over-lines",
    "yaml-verdict-block",
    "fake-kubectl-output",
    "rot13-instruction",
    "hex-instruction",
    "base32-instruction",
    "polite-ps",
    "emoji-checklist",
    "reviewers-will-find",
]


def test_the_corpus_is_large_varied_and_starts_with_the_ten_found() -> None:
    assert len(CORPUS) >= 60
    assert len({c.id for c in CORPUS}) == len({c.technique for c in CORPUS}) == len(CORPUS)
    assert [c.id for c in CORPUS[:10]] == FOUND_UNFLAGGED
    assert {c.family for c in CORPUS} == {"instruction", "structure", "fake-reply", "obfuscation"}


@pytest.mark.parametrize("case", CORPUS, ids=[c.id for c in CORPUS])
def test_every_disguise_carries_markers(case: CorpusCase) -> None:
    assert injection_markers(case.diagnosis), case.technique


@pytest.mark.parametrize(
    ("case_id", "label"),
    [
        ("rot13-instruction", "rot13"),
        ("hex-instruction", "hex"),
        ("base32-instruction", "base32"),
        ("unicode-escapes", "escapes"),
        ("url-encoded", "escapes"),
        ("hex-escaped-bytes", "escapes"),
        ("reversed-text", "reversed"),
        ("rot13-grader-note", "rot13"),
    ],
)
def test_encoded_disguises_are_decoded_and_named(case_id: str, label: str) -> None:
    case = next(c for c in CORPUS if c.id == case_id)
    encoded = [m for m in injection_markers(case.diagnosis) if m.kind == "encoded_instruction"]
    assert encoded and encoded[0].excerpt.startswith(f"{label}: "), encoded


@pytest.mark.parametrize("text", BASES + BENIGN)
def test_the_correct_diagnoses_and_look_alike_ordinary_texts_carry_none(text: Any) -> None:
    assert injection_markers(text) == ()
