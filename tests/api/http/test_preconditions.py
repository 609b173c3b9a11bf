"""``If-Match`` names a revision this service gave out, or the write is refused with 412
naming the header (428 without one): never a 500, whatever the header holds."""

from __future__ import annotations

import pytest

from api.http.preconditions import expected_revision
from api.http.problems import ApiProblem


@pytest.mark.parametrize(
    "header",
    [
        '"\u00b2"',  # the header byte 0xB2 as read: a digit to str.isdigit, not to int
        '"\u0663"',  # ARABIC-INDIC DIGIT THREE
        'W/"3"',  # weak: If-Match compares strongly
        '"1234567890123456789"',
        '"-1"',
        "*",
        '"3", "4"',
    ],
)
def test_an_if_match_that_names_no_revision_of_ours_is_412(header: str) -> None:
    with pytest.raises(ApiProblem) as refused:
        expected_revision(header, what="overrides need If-Match")
    assert (refused.value.status, refused.value.field) == (412, "If-Match")


def test_if_match_names_the_revision_and_is_required() -> None:
    assert expected_revision('"42"', what="x") == 42
    with pytest.raises(ApiProblem) as missing:
        expected_revision(None, what="overrides need If-Match")
    assert (missing.value.status, missing.value.field) == (428, "If-Match")
