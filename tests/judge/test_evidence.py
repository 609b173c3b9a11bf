"""Quoted evidence must occur in the diagnosis, up to case, spacing and punctuation."""

from __future__ import annotations

import pytest

from judge.evidence import quote_occurs

DIAGNOSIS = (
    "Root cause: the `user-service` Deployment (namespace hotel-reservation) sets "
    "USER_PORT=9999, while the Service targets port 8086. Frontend calls fail with "
    "'connection refused'; pods are Running but not Ready."
)


@pytest.mark.parametrize(
    "quote",
    [
        "sets USER_PORT=9999",
        "SETS user_port = 9999",
        "the user-service Deployment (namespace hotel-reservation)",
        'Frontend calls fail with "connection refused"',
        "pods are Running but not Ready.",
        "the `user-service` Deployment ... while the Service targets port 8086",
        "Root cause:   the user-service\n deployment",
        "the Service targts port 8086. Frontend calls fail",  # one copying slip
    ],
)
def test_real_quotes_are_verified(quote: str) -> None:
    assert quote_occurs(quote, DIAGNOSIS)


@pytest.mark.parametrize(
    "quote",
    [
        "",
        "   ",
        "...",
        "the",  # too short to back anything
        "USER_PORT=8080",
        "the database ran out of connections",
        "the `user-service` Deployment ... the database is down",
        "port 99",  # a short passage must match whole words
        "OOMKilled",
    ],
)
def test_fabricated_or_trivial_quotes_are_not_verified(quote: str) -> None:
    assert not quote_occurs(quote, DIAGNOSIS)


def test_full_width_and_invisible_characters_are_normalized() -> None:
    assert quote_occurs("ＵＳＥＲ＿ＰＯＲＴ=9999", DIAGNOSIS)
    assert quote_occurs("USER\u200b_PORT=9999", DIAGNOSIS)
