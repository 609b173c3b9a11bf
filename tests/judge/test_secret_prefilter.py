"""The redaction prefilter: lines it lets skip the detectors are lines they find nothing in."""

from __future__ import annotations

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
            assert secrets._CANDIDATE.search(line), line


def test_an_ordinary_diagnosis_skips_the_detectors() -> None:
    line = (
        "The geo deployment in hotel-reservation listens on port 9001 while its Service "
        "targets 8083, so every search from the frontend fails with HTTP 500."
    )
    assert secrets._CANDIDATE.search(line) is None
    assert secrets.redact(line).text == line


def test_text_redacted_before_is_returned_without_a_new_scan_and_unchanged() -> None:
    first = secrets.redact(f"aws_access_key_id = {cases.AWS_KEY} in the pod env")
    again = secrets.redact(first.text)
    assert again.text == first.text
    assert again.findings == ()
    assert cases.AWS_KEY not in again.text
