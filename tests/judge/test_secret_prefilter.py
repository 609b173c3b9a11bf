"""The redaction prefilter: lines it lets skip the detectors are lines they find nothing in."""

from __future__ import annotations

import json
import re
import string
import subprocess
import sys
from typing import Any

import pytest

from judge import secrets
from tests.judge import test_secrets as cases


def _texts() -> list[str]:
    """Every credential-bearing and ordinary text of the redaction tests."""
    found: list[str] = [cases.AWS_KEY, cases.PEM]
    for test in vars(cases).values():
        for mark in getattr(test, "pytestmark", []):
            if mark.name != "parametrize":
                continue
            for row in mark.args[1]:
                values: Any = row.values if hasattr(row, "values") else row
                values = values if isinstance(values, tuple) else (values,)
                found.extend(v for v in values if isinstance(v, str))
    return found


@pytest.mark.parametrize("text", _texts())
def test_every_line_a_detector_flags_passes_the_prefilter(text: str) -> None:
    for line in text.splitlines(keepends=True):
        if any(True for _ in secrets._line_spans(line)):
            assert secrets.is_candidate(line), line


def test_folding_finds_each_word_wherever_a_case_insensitive_search_would() -> None:
    """Every code point ``re`` equates with a letter when ignoring case folds to that
    letter, so the words are found in the folded line wherever ``(?i)`` finds them in
    the line (the other characters of the words match only themselves either way)."""
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    missed = [
        f"U+{ord(found.group()):04X}"
        for found in re.finditer("(?i)[a-z]", every)  # a character equated with a letter
        if (folded := secrets.fold_for_words(found.group())) not in set(string.ascii_lowercase)
        or not re.fullmatch(f"(?i){folded}", found.group())
    ]
    assert missed == []
    spelled = "Kelvin-\u212aey, paſſword, İbm, ıam, PRIVATE, Sk-, GLPAT-"
    words = [m.group() for m in secrets.CANDIDATE_WORDS.finditer(secrets.fold_for_words(spelled))]
    assert words == ["key", "pass", "ibm", "iam", "private", "sk-", "glpat-"]


def test_an_ordinary_diagnosis_skips_the_detectors() -> None:
    line = (
        "The geo deployment in hotel-reservation listens on port 9001 while its Service "
        "targets 8083, so every search from the frontend fails with HTTP 500."
    )
    assert not secrets.is_candidate(line)
    assert secrets.redact(line).text == line


def test_text_redacted_before_is_returned_without_a_new_scan_and_unchanged() -> None:
    first = secrets.redact(f"aws_access_key_id = {cases.AWS_KEY} in the pod env")
    again = secrets.redact(first.text)
    assert again.text == first.text
    assert again.findings == ()
    assert cases.AWS_KEY not in again.text


_FRESH_REDACT = """
import json, sys
from judge.secrets import redact
before = "detect_secrets" in sys.modules
r = redact(sys.stdin.read())
print(json.dumps([before, "detect_secrets" in sys.modules, r.text, r.records()]))
"""


def _redact_in_a_fresh_process(text: str) -> list[Any]:
    """[detect_secrets imported before, after, redacted text, records] in a new interpreter."""
    done = subprocess.run(
        [sys.executable, "-c", _FRESH_REDACT],
        input=text, capture_output=True, text=True, check=True,
    )  # fmt: skip
    result: list[Any] = json.loads(done.stdout)
    return result


def test_a_diagnosis_without_candidates_never_imports_detect_secrets() -> None:
    line = "The geo deployment in hotel listens on GEO_PORT 9999 while its Service targets 8083.\n"
    before, after, text, records = _redact_in_a_fresh_process(line * 3)
    assert (before, after, text, records) == (False, False, line * 3, [])


def test_a_secret_is_redacted_as_before_when_the_detectors_load_at_its_line() -> None:
    text = (
        "The geo pod restarts: its env has AKIAIOSFODNN7EXAMPLE as the access key,\n"
        "  DB_PASSWORD:  hunter22\n"
        "and it calls redis://:r3dispass@redis:6379/0 with "
        "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n"
        "after the OOM kill at 10:42.\n"
    )
    before, after, redacted, records = _redact_in_a_fresh_process(text)
    assert (before, after) == (False, True)
    assert redacted == (
        "The geo pod restarts: its env has [REDACTED:aws-access-key] as the access key,\n"
        "  DB_PASSWORD:  [REDACTED:secret-keyword]\n"
        "and it calls redis://:[REDACTED:connection-string-password]@redis:6379/0 with "
        "GITHUB_TOKEN=[REDACTED:github-token]\n"
        "after the OOM kill at 10:42.\n"
    )
    assert [(r["kind"], r["start"], r["end"], r["line"]) for r in records] == [
        ("aws-access-key", 34, 54, 1),
        ("secret-keyword", 90, 98, 2),
        ("connection-string-password", 121, 130, 3),
        ("github-token", 162, 202, 3),
    ]
