"""Where a judge runs (its base URL) is for adjudicators and admins: the grading object a
submitter reads names judges as ``backend:model`` and carries no URL in ``detail``."""

from __future__ import annotations

import pytest

from api.service.visibility import _without_addresses


@pytest.mark.parametrize(
    ("detail", "shown"),
    [
        (
            "held pass not confirmed by openai:c@http://10.2.3.4:8080/v1: it failed it",
            "held pass not confirmed by openai:c: it failed it",
        ),
        (
            "judge request failed: ConnectError for url 'https://judge.internal/api/chat'",
            "judge request failed: ConnectError for url '<judge address>'",
        ),
        ("the judge's reply could not be parsed", "the judge's reply could not be parsed"),
        (None, None),
    ],
)
def test_a_detail_shown_to_a_submitter_names_no_address(detail: str | None, shown: str) -> None:
    assert _without_addresses(detail) == shown
