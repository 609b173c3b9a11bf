"""Marking the judge's quotes in a diagnosis: exact, and when the quote differs only in
case, white space or punctuation (or a small copying slip in a long quote); and the
ground truth's values, wherever the checks in code read them."""

from __future__ import annotations

import random
import unicodedata

import pytest

from api.adjudication.highlight import Mark, segments
from judge.evidence import check_quote
from judge.grounding import check_condition, facts_of
from judge.inputs import DEFAULT_MAX_TEXT_BYTES
from tests.support.timing import best_seconds

TEXT = "The  user-service Deployment\nsets USER_PORT = 9999; the frontend fails."


def _marked(needle: str, kind: str = "verified") -> list[tuple[str, str | None, str]]:
    parts = segments(TEXT, [Mark(needle, kind, "D1-Q1")])
    return [(s.text, s.kind, s.label) for s in parts if s.kind]


def test_an_exact_quote_is_marked_as_it_stands() -> None:
    assert _marked("USER_PORT = 9999") == [("USER_PORT = 9999", "verified", "D1-Q1")]


def test_a_quote_differing_in_case_space_and_punctuation_is_marked_approximately() -> None:
    assert _marked("user service deployment sets") == [
        ("user-service Deployment\nsets", "verified", "D1-Q1 (approximate)")
    ]
    assert _marked("sets user_port=9999", "unverified") == [
        ("sets USER_PORT = 9999", "unverified", "D1-Q1 (approximate)")
    ]


def test_a_long_quote_with_a_slip_is_marked_but_an_invented_one_is_not() -> None:
    marked = _marked("the user-servise deployment sets USER_PORT")
    assert marked and marked[0][0].startswith("The  user-service") and "USER_PORT" in marked[0][0]
    assert _marked("the database ran out of connections") == []


def test_ground_truth_values_match_exactly_only() -> None:
    assert _marked("user service", "grounding") == []
    assert _marked("user-service", "grounding") == [("user-service", "grounding", "D1-Q1")]


def test_the_text_is_cut_without_loss() -> None:
    marks = [Mark("frontend FAILS", "verified", "q"), Mark("9999", "grounding", "g")]
    parts = segments(TEXT, marks)
    assert "".join(s.text for s in parts) == TEXT


def _verified_spans(text: str, marks: list[Mark]) -> list[tuple[int, int]]:
    """Where the page marks ``text`` green (``verified``), as (start, end) offsets."""
    spans, at = [], 0
    for segment in segments(text, marks):
        if segment.kind == "verified":
            spans.append((at, at + len(segment.text)))
        at += len(segment.text)
    return spans


def test_a_verified_quote_is_not_marked_inside_a_longer_number() -> None:
    """A quote "8080" is marked on the port 8080, never inside "18080": the adjudicator
    sees the judge's evidence where the evidence check found it."""
    text = "The frontend calls port 18080, but the payment pods listen on 8080."
    own = text.rindex("8080")
    assert _verified_spans(text, [Mark("8080", "verified", "D2-Q1")]) == [(own, own + 4)]


def test_a_verified_quote_is_not_marked_inside_a_longer_word() -> None:
    """A passage "reachable" is marked where the text says "reachable", never inside
    "unreachable" (the opposite claim), whether found as it stands or approximately."""
    text = "Port 8080 is unreachable from the frontend; the database is reachable."
    own = text.rindex("reachable")
    marks = [Mark("the database", "verified", "D1-Q2"), Mark("reachable", "verified", "D1-Q2")]
    spans = _verified_spans(text, marks)
    assert (own, own + len("reachable")) in spans
    assert not [s for s in spans if s[0] < text.index("from")], spans
    only_inside = "Port 8080 is unreachable from the frontend."
    for needle in ("reachable", "Reachable,", "reachable, from the"):
        assert _verified_spans(only_inside, [Mark(needle, "verified", "D1-Q2")]) == []


def test_a_text_the_quote_merely_contains_is_not_marked_as_the_quote() -> None:
    """A long quote is marked only where the whole of it occurs: a shorter text that the
    quote merely contains ("user-service pod") is not an occurrence of it."""
    quote = "the user-service pod restarts constantly after the rollout"
    marked = [s for s in segments("user-service pod", [Mark(quote, "traced", "D1-Q1")]) if s.kind]
    assert marked == []


@pytest.mark.parametrize("quote", ["256Mi", "limit is 256Mi"])
def test_a_quote_differing_in_the_space_before_its_unit_is_marked(quote: str) -> None:
    """A quote the evidence check finds with its unit written apart or together ("256Mi"
    for "256 Mi") is marked in the diagnosis, over the text as the diagnosis writes it."""
    text = "The checkout pod's memory limit is 256 Mi, so the kernel OOM-kills it under load."
    assert check_quote(quote, text) == "found"
    marked = [s.text for s in segments(text, [Mark(quote, "verified", "D2-Q2")]) if s.kind]
    assert marked and "256 Mi" in "".join(marked)


#: a diagnosis sent decomposed (NFD, as macOS often sends text): each accented letter
#: is a base letter and a combining mark
DECOMPOSED = unicodedata.normalize(
    "NFD", "Le café-service a perdu sa base de données. Le pod redémarre."
)


def _marked_in_decomposed(needle: str, kind: str = "verified") -> list[str]:
    return [s.text for s in segments(DECOMPOSED, [Mark(needle, kind, "D1-Q1")]) if s.kind]


@pytest.mark.parametrize(
    "quote",
    [
        "base de données",
        "Le café-service a perdu sa base de données",
        unicodedata.normalize("NFD", "perdu sa base de données"),
    ],
)
def test_a_verified_quote_is_marked_whole_in_a_decomposed_diagnosis(quote: str) -> None:
    """The evidence check reads the diagnosis composed (NFKC), so a quote copied with
    composed accents is found in a decomposed one: the page marks it too, whole, each
    accented letter with its mark."""
    assert check_quote(quote, DECOMPOSED) == "found"
    assert _marked_in_decomposed(quote) == [unicodedata.normalize("NFD", quote)]


def test_a_value_is_not_marked_inside_a_decomposed_letter() -> None:
    """``cafe`` is not marked in a decomposed ``café``: the accent belongs to the
    letter."""
    assert _marked_in_decomposed("cafe", "grounding") == []
    assert _marked_in_decomposed(unicodedata.normalize("NFD", "café"), "grounding") == [
        unicodedata.normalize("NFD", "café")
    ]


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


GEO_TRUTH = (
    "[fault_spec] component=configmap/geo-config; namespace=hotel || "
    "CITY=Zürich replaced CITY=Geneva in geo-config; the geo service crashes."
)


@pytest.mark.parametrize("truth_form", ["NFC", "NFD"])
def test_a_value_of_the_ground_truth_is_marked_in_a_decomposed_diagnosis(truth_form: str) -> None:
    """A diagnosis written decomposed (NFD, as macOS often sends text) that names a value
    of the ground truth, composed or decomposed there, has it marked where the check in
    code finds it named, each letter whole with its accent."""
    facts = facts_of(unicodedata.normalize(truth_form, GEO_TRUTH))
    assert facts is not None
    diagnosis = _nfd("The geo-config configmap in hotel sets CITY=Zürich, so geo crashes.")
    assert check_condition("values", facts, diagnosis) is None
    marks = [Mark(v, "grounding", "ground truth") for v in (*facts.components, *facts.values)]
    marked = [s.text for s in segments(diagnosis, marks) if s.kind == "grounding"]
    assert marked == ["geo-config", _nfd("CITY=Zürich")]


@pytest.mark.parametrize(
    ("written", "value"),
    [
        ("the frontend calls port ８０８０ of payment", "8080"),  # fullwidth digits
        ("geo\u2010config sets CITY to Zurich", "geo-config"),  # a Unicode hyphen
        (_nfd("le café-service perd sa base"), "café-service"),
    ],
)
def test_a_value_written_otherwise_as_the_checks_read_it_is_marked(
    written: str, value: str
) -> None:
    """A value the diagnosis writes with fullwidth digits, a Unicode hyphen or decomposed
    accents (all read as the ground truth writes it by the checks in code) is marked, over
    the text as the diagnosis writes it."""
    marked = [s.text for s in segments(written, [Mark(value, "grounding", "g")]) if s.kind]
    assert len(marked) == 1
    assert unicodedata.normalize("NFKC", marked[0]).replace("\u2010", "-") == value


def test_a_value_in_fullwidth_digits_is_not_marked_inside_a_longer_number() -> None:
    """Read as the checks read it, a value is still marked on word boundaries only:
    ``8080`` not inside ``１８０８０`` (nor ``cafe`` inside a decomposed ``café``, above)."""
    text = "port １８０８０ is open, port ８０８０ is not"
    marked = [s.text for s in segments(text, [Mark("8080", "grounding", "g")]) if s.kind]
    assert marked == ["８０８０"]


def test_many_paraphrased_quotes_in_the_largest_diagnosis_mark_about_as_fast_as_one() -> None:
    """The grading page marks every quote of every answer in the diagnosis while the
    server waits: on the largest diagnosis accepted, 36 quotes that must be looked for
    approximately (9 answers x 4 passages) take about as long as one, so a grading with
    many quotes does not hold up the server. Measured against the same page with one
    quote, so the machine's speed cancels out."""
    rng = random.Random(2)
    words = ["user-service", "pod", "8080", "port", "memory", "512Mi", "not", "crash",
             "hotel", "namespace", "the", "is", "frontend", "reaches", "wrong"]  # fmt: skip
    text = " ".join(rng.choice(words) for _ in range(DEFAULT_MAX_TEXT_BYTES // 4))
    text = text[:DEFAULT_MAX_TEXT_BYTES]
    quote = "the frontend pod of hotel reaches user-service on the wrong port"
    one = [Mark(f"{quote} 00", "unverified", "D1-Q1")]
    many = [Mark(f"{quote} {q}{p}", "unverified", f"D{q}-Q{p}") for q in range(9) for p in range(4)]
    # a fresh text each run: nothing worked out for one text carries to the next
    texts = iter(f"{text}{'.' * n}" for n in range(4))
    single = best_seconds(lambda: segments(next(texts), one))
    several = best_seconds(lambda: segments(next(texts), many))
    assert several < 6 * single, (single, several)
