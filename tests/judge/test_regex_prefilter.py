"""The injection screen's prefilter is sound: it never skips a pattern that would match.

A pattern runs on a text form only when ``judge.regex_prefilter`` says the form holds
the literals the pattern needs. Checked here on every form the screen searches (folded,
look-alikes unmapped, leetspeak undone, spaced letters joined, base64 decoded) of every
text of ``bench/screening.py`` (calibration set, both injection regression sets with
their benign texts, the bench diagnosis, and every case and benign text under eight
disguises), whole and line by line, and on the letters that case folding leaves
equivalent to another for a case-insensitive pattern, over every code point.
"""

from __future__ import annotations

import re

import pytest

from bench.screening import texts
from judge.injection import _PATTERNS, _prefilter, fold
from judge.injection_forms import base64_texts, collapse_spaced, unleet
from judge.prompt import normalize_untrusted
from judge.regex_prefilter import ALWAYS, clauses, prepared, required

PATTERNS = [p for patterns in _PATTERNS.values() for p in patterns]
PREFILTER = _prefilter()  # the screen's own
CORPORA = texts()


def _forms(text: str) -> list[str]:
    """The folded forms ``injection_markers`` searches for ``text``."""
    normal = normalize_untrusted(text)
    folded = fold(text)
    forms = [folded, fold(text, lookalikes=False), unleet(folded), fold(collapse_spaced(normal))]
    return forms + [fold(decoded) for decoded in base64_texts(normal)]


@pytest.mark.parametrize("name", list(CORPORA))
def test_no_pattern_that_matches_a_form_is_skipped(name: str) -> None:
    skipped = []
    for text in CORPORA[name]:
        for piece in {text, *text.splitlines()}:
            for form in _forms(piece):
                may = PREFILTER.candidates(form)
                skipped.extend(
                    (PATTERNS[n], form[:80])
                    for n, pattern in enumerate(PATTERNS)
                    if n not in may and re.search(pattern, form, re.IGNORECASE)
                )
    assert not skipped, skipped[:5]


def test_the_disguised_corpus_runs_the_patterns_that_find_its_markers() -> None:
    """Not vacuous: the disguises hold matches, and the prefilter lets each through."""
    matched = 0
    for text in CORPORA["disguised variants"] + CORPORA["disguised cases"]:
        for form in _forms(text):
            found = {n for n, p in enumerate(PATTERNS) if re.search(p, form, re.IGNORECASE)}
            assert found <= PREFILTER.candidates(form)
            matched += bool(found)
    assert matched >= 400


def test_ordinary_diagnoses_run_few_patterns() -> None:
    for text in CORPORA["bench diagnosis"]:
        assert len(PREFILTER.candidates(fold(text))) <= 3


@pytest.mark.parametrize(
    ("pattern", "condition"),
    [
        (r"\bnew (?:instructions?|task)\b", ("any", ("new instruction", "new task"))),
        (r"\bground[\s_-]*truth\b", ("all", ("ground", "truth"))),
        (r"<!--[\s\S]*?(?:-->|$)", "<!--"),
        (r"(?:ab|c\w*)d?", ("any", ("ab", "c"))),
        (r"\w*(?:x|y)?", ALWAYS),
        (r"(?-i:Ab)", ALWAYS),  # inline flags: not understood, so nothing required
    ],
)
def test_a_pattern_requires_its_literals(pattern: str, condition: object) -> None:
    assert required(pattern) == condition


def test_long_literals_are_cut_to_their_start_and_end() -> None:
    found = clauses(("any", ("ignore all previous", "disregard")), longest=6)
    assert found == (frozenset({"ignore", "disreg"}), frozenset({"evious", "regard"}))


def test_case_folded_text_equates_no_other_letter_with_a_literal() -> None:
    """Every character case folding can produce that a case-insensitive pattern equates
    with a literal the prefilter looks for is mapped to that literal (``ı`` to ``i``)."""
    literals = {
        char
        for pattern in PATTERNS
        for clause in clauses(required(pattern))
        for atom in clause
        for char in atom
    }
    # every code point, case folded in one call (folding is character by character)
    folded = "".join(
        chr(code) for code in range(0x110000) if not 0xD800 <= code < 0xE000
    ).casefold()
    any_literal = re.compile("[" + "".join(map(re.escape, sorted(literals))) + "]", re.IGNORECASE)
    near = set(any_literal.findall(folded))  # one scan, then each character found
    equated = {
        (other, char)
        for other in near
        for char in literals
        if other != char
        and any(  # as a literal or in a character class
            re.fullmatch(form, other, re.IGNORECASE)
            for form in (re.escape(char), f"[{re.escape(char)}]")
        )
    }
    assert equated, "dotless i is one"
    assert {(other, char) for other, char in equated if prepared(other) != char} == set()
