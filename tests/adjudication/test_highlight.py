"""Marking the judge's quotes in a diagnosis: exact, and when the quote differs only in
case, white space or punctuation (or a small copying slip in a long quote)."""

from __future__ import annotations

from api.adjudication.highlight import Mark, segments

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
